// The CUDA activation kernels against the CPU ones, from the same inputs.
#include <gtest/gtest.h>

#include <vector>

#include "bitwise.h"
#include "cuda_testing.h"
#include "testing.h"
#include "weft/kernels/activation.h"

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

struct Case {
  int64_t rows, cols;
  DType dtype;
};
// Odd sizes (no multiple of a warp or a vector) and GPT-2's (1024 tokens of 768).
const std::vector<Case> kCases = {{37, 771, DType::f32},
                                  {1024, 768, DType::f32},
                                  {37, 771, DType::bf16},
                                  {1024, 768, DType::bf16}};

testing::Tolerance tol(DType dtype) { return dtype == DType::f32 ? kF32 : kBF16; }

TEST(CudaActivation, GeluForwardAndBackwardMatchCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  for (const Case& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.cols << " " << dtype_name(c.dtype));
    const Tensor x = random_tensor({c.rows, c.cols}, 1, -6, 6, c.dtype);
    const Tensor dy = random_tensor({c.rows, c.cols}, 2, -1, 1, c.dtype);
    Tensor y = Tensor::empty(x.shape(), c.dtype), dx = Tensor::empty(x.shape(), c.dtype);
    gelu_forward(cpu_ec, x, y);
    gelu_backward(cpu_ec, dy, x, dx);
    const Tensor gx = gpu(x), gdy = gpu(dy);
    Tensor gy = gpu(Tensor::zeros(x.shape(), c.dtype)),
           gdx = gpu(Tensor::zeros(x.shape(), c.dtype));
    gelu_forward(gec, gx, gy);
    gelu_backward(gec, gdy, gx, gdx);
    // tanh differs in the last bits between oneDNN's and CUDA's. Where
    // 1 + tanh cancels (x < -2) the results are tiny but their error is that
    // of the O(|x|) terms they came from: a few ulps of 1 (measured on an H100:
    // 1.0e-6 in dx at |x| < 6). So errors are relative to 1, not to the value.
    EXPECT_TRUE(close(y, host(gy), tol(c.dtype), 1.0));
    EXPECT_TRUE(close(dx, host(gdx), tol(c.dtype), 1.0));
  }
}

TEST(CudaActivation, BiasAddMatchesCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  for (const Case& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.cols << " " << dtype_name(c.dtype));
    Tensor y = random_tensor({c.rows, c.cols}, 3, -1, 1, c.dtype);
    const Tensor bias = random_tensor({c.cols}, 4);
    Tensor gy = gpu(y);
    bias_add(cpu_ec, y, bias);
    bias_add(gec, gy, gpu(bias));
    // One f32 add per element, rounded once: the same bits.
    EXPECT_TRUE(bitwise_equal(y, gy));
  }
}

TEST(CudaActivation, BiasBackwardAccumulatesInTheCpuOrder) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  for (const Case& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.cols << " " << dtype_name(c.dtype));
    const Tensor dy = random_tensor({c.rows, c.cols}, 5, -1, 1, c.dtype);
    Tensor dbias = random_tensor({c.cols}, 6);
    Tensor gdbias = gpu(dbias);
    bias_backward(cpu_ec, dy, dbias);
    bias_backward(cpu_ec, dy, dbias);
    const Tensor gdy = gpu(dy);
    bias_backward(gec, gdy, gdbias);
    bias_backward(gec, gdy, gdbias);
    // Same blocks of 64 rows, same block order, no FMA: the CPU's bits.
    EXPECT_TRUE(bitwise_equal(dbias, gdbias));
  }
}

// More blocks of 64 rows than a grid's y dimension holds (65535).
TEST(CudaActivation, BiasBackwardPastTheGridLimit) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  const Tensor dy = random_tensor({64 * 65536 + 37, 3}, 12);
  Tensor dbias = random_tensor({3}, 13);
  Tensor gdbias = gpu(dbias);
  bias_backward(cpu_ec, dy, dbias);
  bias_backward(gec, gpu(dy), gdbias);
  EXPECT_TRUE(bitwise_equal(dbias, gdbias));
}

TEST(CudaActivation, AddAxpyScaleMatchCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  for (const Case& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.cols << " " << dtype_name(c.dtype));
    const Shape shape{c.rows, c.cols};
    Tensor a = random_tensor(shape, 7, -1, 1, c.dtype);
    const Tensor b = random_tensor(shape, 8, -1, 1, c.dtype);
    Tensor ga = gpu(a);
    const Tensor gb = gpu(b);
    Tensor out = Tensor::empty(shape, c.dtype), gout = gpu(Tensor::zeros(shape, c.dtype));
    add(cpu_ec, a, b, out);
    add(gec, ga, gb, gout);
    EXPECT_TRUE(bitwise_equal(out, gout));
    add(cpu_ec, a, b, a);  // out aliasing an input
    add(gec, ga, gb, ga);
    EXPECT_TRUE(bitwise_equal(a, ga));

    // Products rounded before the add (no FMA) on both: the same bits.
    // x f32 into y of the case's dtype, and x of the case's dtype into f32.
    const Tensor x32 = random_tensor(shape, 9);
    Tensor y = random_tensor(shape, 10, -1, 1, c.dtype);
    Tensor gy = gpu(y);
    axpy(cpu_ec, 0.37f, x32, y);
    axpy(gec, 0.37f, gpu(x32), gy);
    EXPECT_TRUE(bitwise_equal(y, gy));
    Tensor y32 = random_tensor(shape, 11);
    Tensor gy32 = gpu(y32);
    axpy(cpu_ec, -1.5f, b, y32);
    axpy(gec, -1.5f, gb, gy32);
    EXPECT_TRUE(bitwise_equal(y32, gy32));

    scale(cpu_ec, y, 0.731f);
    scale(gec, gy, 0.731f);
    EXPECT_TRUE(bitwise_equal(y, gy));
  }
}

}  // namespace
}  // namespace weft::kernels
