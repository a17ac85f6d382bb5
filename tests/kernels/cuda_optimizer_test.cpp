// The CUDA AdamW step and sums of squares (single- and multi-tensor) against the CPU ones.
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

// Sizes that cut tensors across launches: more tensors (100) than a launch
// holds, and more chunks than its blocks (a 30-million-element tensor), with
// empty and one-element tensors between them.
std::vector<int64_t> launch_sizes() {
  std::vector<int64_t> sizes = {30'000'003, 0, 1, 65537};
  for (int i = 0; i < 100; ++i) sizes.push_back(1 + (i * 4099) % 70001);
  return sizes;
}

TEST(CudaOptimizer, AdamwStepMultiMatchesCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  const std::vector<int64_t> sizes = launch_sizes();
  std::vector<Tensor> p, g, m, v, gp, gg, gm, gv;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const auto seed = static_cast<uint32_t>(3 * i);
    p.push_back(random_tensor({sizes[i]}, seed));
    g.push_back(random_tensor({sizes[i]}, seed + 1, -2, 2));
    m.push_back(Tensor::zeros({sizes[i]}));
    v.push_back(Tensor::zeros({sizes[i]}));
    gp.push_back(gpu(p.back()));
    gg.push_back(gpu(g.back()));
    gm.push_back(gpu(m.back()));
    gv.push_back(gpu(v.back()));
  }
  std::vector<AdamWSegment> cpu_segments, gpu_segments;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const bool decay = i % 2 == 0;
    cpu_segments.push_back(
        {.params = &p[i], .grads = &g[i], .m = &m[i], .v = &v[i], .decay = decay});
    gpu_segments.push_back(
        {.params = &gp[i], .grads = &gg[i], .m = &gm[i], .v = &gv[i], .decay = decay});
  }
  AdamWConfig cfg{.lr = 6e-4f, .weight_decay = 0.1f};
  for (int64_t step = 1; step <= 2; ++step) {
    cfg.step = step;
    cfg.grad_scale = step == 2 ? 0.37f : 1.0f;
    adamw_step_multi(cpu_ec, cpu_segments, cfg);
    adamw_step_multi(gec, gpu_segments, cfg);
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(p[i], gp[i])) << "tensor " << i;
    EXPECT_TRUE(bitwise_equal(m[i], gm[i])) << "tensor " << i;
    EXPECT_TRUE(bitwise_equal(v[i], gv[i])) << "tensor " << i;
  }
}

TEST(CudaOptimizer, SumOfSquaresMultiMatchesCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  const std::vector<int64_t> sizes = launch_sizes();
  std::vector<Tensor> xs, gxs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    xs.push_back(random_tensor({sizes[i]}, static_cast<uint32_t>(40 + i), -3, 3));
    gxs.push_back(gpu(xs.back()));
  }
  const std::vector<double> expected = sum_of_squares_multi(cpu_ec, xs);
  const std::vector<double> got = sum_of_squares_multi(gec, gxs);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_NEAR(got[i], expected[i], 1e-12 * expected[i]) << "tensor " << i;
    // Each tensor's sum as the single-tensor kernel gives it.
    EXPECT_EQ(got[i], sum_of_squares(gec, gxs[i])) << "tensor " << i;
  }
  // Deterministic: the same bits on a second call.
  EXPECT_EQ(got, sum_of_squares_multi(gec, gxs));
}

}  // namespace
}  // namespace weft::kernels
