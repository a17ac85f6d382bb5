// The CUDA layer norm and RMS norm kernels against the CPU ones, from the
// same inputs.
#include <gtest/gtest.h>

#include <vector>

#include "bitwise.h"
#include "cuda_testing.h"
#include "testing.h"
#include "weft/kernels/norm.h"

namespace weft::kernels {
namespace {

using weft::testing::bitwise_equal;
using weft::testing::close;
using weft::testing::gpu;
using weft::testing::host;
using weft::testing::kBF16;
using weft::testing::kF32;
using weft::testing::random_tensor;

const ExecContext& cpu_ec = ExecContext::host();
constexpr float kEps = 1e-5f;

struct Case {
  int64_t rows, cols;
  DType dtype;
};
// Odd sizes (a partial last block of 64 rows, columns no multiple of the
// block), GPT-2's (1024 tokens of 768), and more than 64 blocks of rows.
const std::vector<Case> kCases = {{37, 771, DType::f32},    {1024, 768, DType::f32},
                                  {4100, 96, DType::f32},   {37, 771, DType::bf16},
                                  {1024, 768, DType::bf16}, {4100, 96, DType::bf16}};

// Outputs built from row sums that the GPU adds in a tree and the CPU in
// sequence: they differ by a few f32 ulps of the O(1) terms, so an element
// that cancels to near zero is compared against that scale (1e-5 absolute).
testing::Tolerance tol(DType dtype) { return dtype == DType::f32 ? kF32 : kBF16; }
double scale_of(DType dtype) { return dtype == DType::f32 ? 1.0 : 0.0; }

TEST(CudaNorm, LayerNormMatchesCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  for (const Case& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.cols << " " << dtype_name(c.dtype));
    const Shape shape{c.rows, c.cols};
    // An offset mean, so that the variance is taken about the mean; a small
    // one, since the CPU's sequential row sum loses ~sqrt(C) ulps of the sum
    // and the output compares that error against the row's spread.
    const Tensor x = random_tensor(shape, 1, -0.5, 1.5, c.dtype);
    const Tensor gamma = random_tensor({c.cols}, 2, 0.5, 1.5), beta = random_tensor({c.cols}, 3);
    Tensor y = Tensor::empty(shape, c.dtype), mean = Tensor::empty({c.rows}),
           rstd = Tensor::empty({c.rows});
    layer_norm_forward(cpu_ec, x, gamma, beta, kEps, y, mean, rstd);
    const Tensor gx = gpu(x), ggamma = gpu(gamma);
    Tensor gy = gpu(Tensor::zeros(shape, c.dtype)), gmean = gpu(Tensor::zeros({c.rows})),
           grstd = gpu(Tensor::zeros({c.rows}));
    layer_norm_forward(gec, gx, ggamma, gpu(beta), kEps, gy, gmean, grstd);
    EXPECT_TRUE(close(y, host(gy), tol(c.dtype), scale_of(c.dtype)));
    EXPECT_TRUE(close(mean, host(gmean), kF32));
    EXPECT_TRUE(close(rstd, host(grstd), kF32));

    // Backward from the CPU's statistics on both sides, accumulating twice
    // into non-zero dgamma/dbeta.
    const Tensor dy = random_tensor(shape, 4, -1, 1, c.dtype);
    Tensor dx = Tensor::empty(shape, c.dtype);
    Tensor dgamma = random_tensor({c.cols}, 5), dbeta = random_tensor({c.cols}, 6);
    Tensor gdx = gpu(Tensor::zeros(shape, c.dtype)), gdgamma = gpu(dgamma), gdbeta = gpu(dbeta);
    const Tensor gdy = gpu(dy), gm = gpu(mean), gr = gpu(rstd);
    for (int i = 0; i < 2; ++i) {
      layer_norm_backward(cpu_ec, dy, x, gamma, mean, rstd, dx, dgamma, dbeta);
      layer_norm_backward(gec, gdy, gx, ggamma, gm, gr, gdx, gdgamma, gdbeta);
    }
    EXPECT_TRUE(close(dx, host(gdx), tol(c.dtype), scale_of(c.dtype)));
    // The CPU's blocks of 64 rows and block order, without FMA: its bits.
    EXPECT_TRUE(bitwise_equal(dgamma, gdgamma));
    EXPECT_TRUE(bitwise_equal(dbeta, gdbeta));
  }
}

TEST(CudaNorm, RmsNormMatchesCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  for (const Case& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.cols << " " << dtype_name(c.dtype));
    const Shape shape{c.rows, c.cols};
    const Tensor x = random_tensor(shape, 7, -2, 2, c.dtype);
    const Tensor gamma = random_tensor({c.cols}, 8, 0.5, 1.5);
    Tensor y = Tensor::empty(shape, c.dtype), rstd = Tensor::empty({c.rows});
    rms_norm_forward(cpu_ec, x, gamma, kEps, y, rstd);
    const Tensor gx = gpu(x), ggamma = gpu(gamma);
    Tensor gy = gpu(Tensor::zeros(shape, c.dtype)), grstd = gpu(Tensor::zeros({c.rows}));
    rms_norm_forward(gec, gx, ggamma, kEps, gy, grstd);
    EXPECT_TRUE(close(y, host(gy), tol(c.dtype), scale_of(c.dtype)));
    EXPECT_TRUE(close(rstd, host(grstd), kF32));

    const Tensor dy = random_tensor(shape, 9, -1, 1, c.dtype);
    Tensor dx = Tensor::empty(shape, c.dtype), dgamma = random_tensor({c.cols}, 10);
    Tensor gdx = gpu(Tensor::zeros(shape, c.dtype)), gdgamma = gpu(dgamma);
    const Tensor gdy = gpu(dy), gr = gpu(rstd);
    for (int i = 0; i < 2; ++i) {
      rms_norm_backward(cpu_ec, dy, x, gamma, rstd, dx, dgamma);
      rms_norm_backward(gec, gdy, gx, ggamma, gr, gdx, gdgamma);
    }
    EXPECT_TRUE(close(dx, host(gdx), tol(c.dtype), scale_of(c.dtype)));
    EXPECT_TRUE(bitwise_equal(dgamma, gdgamma));
  }
}

// More blocks of 64 rows than a grid's y dimension holds (65535).
TEST(CudaNorm, ParameterGradientsPastTheGridLimit) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  const int64_t n = 64 * 65536 + 37, c = 3;
  const Tensor x = random_tensor({n, c}, 11), dy = random_tensor({n, c}, 12);
  const Tensor gamma = random_tensor({c}, 13, 0.5, 1.5), beta = random_tensor({c}, 14);
  Tensor y = Tensor::empty({n, c}), dx = Tensor::empty({n, c});
  Tensor mean = Tensor::empty({n}), rstd = Tensor::empty({n});
  layer_norm_forward(cpu_ec, x, gamma, beta, kEps, y, mean, rstd);
  Tensor dgamma = Tensor::zeros({c}), dbeta = Tensor::zeros({c});
  Tensor gdgamma = gpu(dgamma), gdbeta = gpu(dbeta), gdx = gpu(dx);
  const Tensor gx = gpu(x), gdy = gpu(dy), ggamma = gpu(gamma);
  layer_norm_backward(cpu_ec, dy, x, gamma, mean, rstd, dx, dgamma, dbeta);
  layer_norm_backward(gec, gdy, gx, ggamma, gpu(mean), gpu(rstd), gdx, gdgamma, gdbeta);
  EXPECT_TRUE(bitwise_equal(dgamma, gdgamma));
  EXPECT_TRUE(bitwise_equal(dbeta, gdbeta));
  Tensor rdgamma = Tensor::zeros({c}), grdgamma = gpu(rdgamma);
  rms_norm_forward(cpu_ec, x, gamma, kEps, y, rstd);
  rms_norm_backward(cpu_ec, dy, x, gamma, rstd, dx, rdgamma);
  rms_norm_backward(gec, gdy, gx, ggamma, gpu(rstd), gdx, grdgamma);
  EXPECT_TRUE(bitwise_equal(rdgamma, grdgamma));
}

}  // namespace
}  // namespace weft::kernels
