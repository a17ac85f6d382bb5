// The CUDA AdamW step and sum of squares against the CPU ones.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "bitwise.h"
#include "cuda_testing.h"
#include "testing.h"
#include "weft/kernels/optimizer.h"

namespace weft::kernels {
namespace {

using weft::testing::bitwise_equal;
using weft::testing::gpu;
using weft::testing::random_tensor;

const ExecContext& cpu_ec = ExecContext::host();

TEST(CudaOptimizer, AdamwStepMatchesCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  for (const int64_t n : {int64_t{37 * 771}, int64_t{1024 * 768}}) {
    SCOPED_TRACE(::testing::Message() << n << " elements");
    Tensor p = random_tensor({n}, 1), m = Tensor::zeros({n}), v = Tensor::zeros({n});
    Tensor gp = gpu(p), gm = gpu(m), gv = gpu(v);
    AdamWConfig cfg;
    cfg.lr = 6e-4f;
    cfg.weight_decay = 0.1f;
    cfg.grad_scale = 0.37f;
    for (int64_t step = 1; step <= 3; ++step) {
      cfg.step = step;
      const Tensor g = random_tensor({n}, static_cast<uint32_t>(10 + step), -2, 2);
      adamw_step(cpu_ec, p, g, m, v, cfg);
      adamw_step(gec, gp, gpu(g), gm, gv, cfg);
    }
    // Each operation rounded separately on both (no FMA): the CPU's bits.
    EXPECT_TRUE(bitwise_equal(p, gp));
    EXPECT_TRUE(bitwise_equal(m, gm));
    EXPECT_TRUE(bitwise_equal(v, gv));
  }
}

TEST(CudaOptimizer, SumOfSquaresMatchesCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  for (const int64_t n :
       {int64_t{1}, int64_t{37 * 771}, int64_t{1024 * 768}, int64_t{(1 << 24) + 3}}) {
    SCOPED_TRACE(::testing::Message() << n << " elements");
    const Tensor x = random_tensor({n}, 20, -3, 3);
    const Tensor gx = gpu(x);
    const double expected = sum_of_squares(cpu_ec, x);
    const double got = sum_of_squares(gec, gx);
    // Exact squares summed in f64 in another order: relative error ~n·2^-53.
    EXPECT_NEAR(got, expected, 1e-12 * expected);
    // Deterministic: the same bits on a second call.
    EXPECT_EQ(got, sum_of_squares(gec, gx));
  }
}

}  // namespace
}  // namespace weft::kernels
