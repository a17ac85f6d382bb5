// The CUDA AdamW step and sums of squares (single- and multi-tensor) against the CPU ones.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "bitwise.h"
#include "cuda_testing.h"
#include "testing.h"
#include "weft/kernels/optimizer.h"
#include "weft/kernels/step_scalars.h"

namespace weft::kernels {
namespace {

using weft::testing::bitwise_equal;
using weft::testing::gpu;
using weft::testing::host;
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

// The step's scalars on the GPU: the CPU's arithmetic, bit for bit, and
// nothing read back until the test copies the results.
TEST(CudaOptimizer, StepScalarsMatchCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  const Tensor losses = Tensor::from({3}, std::vector<float>{2.5f, 1.0f / 3.0f, 7.25f});
  Tensor acc = Tensor::zeros({1}, DType::f64), gacc = gpu(acc);
  for (int64_t i = 0; i < 3; ++i) {
    const Tensor l = losses.narrow(i, 1);
    accumulate_scalar(cpu_ec, l, acc, i == 0);
    accumulate_scalar(gec, gpu(l), gacc, i == 0);
  }
  EXPECT_TRUE(bitwise_equal(acc, gacc));
  Tensor out = Tensor::zeros({2}), gout = gpu(out);
  finish_mean(cpu_ec, acc, 3.0, 0.25f, out);
  finish_mean(gec, gacc, 3.0, 0.25f, gout);
  EXPECT_TRUE(bitwise_equal(out, gout));
  for (const double sum : {4.0, 0.25, 1e10, -1.0, std::nan("")}) {
    for (const double max_norm : {0.0, 1.0}) {
      Tensor norm = Tensor::empty({1}, DType::f64), scale = Tensor::zeros({1});
      *norm.data<double>() = sum;
      Tensor gnorm = gpu(norm), gscale = gpu(scale);
      clip_scale(cpu_ec, out, norm, max_norm, scale);
      clip_scale(gec, gout, gnorm, max_norm, gscale);
      EXPECT_TRUE(bitwise_equal(norm, gnorm)) << sum << " " << max_norm;
      EXPECT_TRUE(bitwise_equal(scale, gscale)) << sum << " " << max_norm;
    }
  }
}

TEST(CudaOptimizer, AdamwGradScaleFromTheDeviceAndSumOfSquaresTotal) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  const int64_t n = 37 * 771;
  Tensor p = random_tensor({n}, 1), m = Tensor::zeros({n}), v = Tensor::zeros({n});
  Tensor gp = gpu(p), gm = gpu(m), gv = gpu(v);
  const Tensor g = random_tensor({n}, 2, -2, 2), gg = gpu(g);
  const Tensor scale = Tensor::from({1}, std::vector<float>{0.37f}), gscale = gpu(scale);
  AdamWConfig cfg;
  cfg.lr = 6e-4f;
  cfg.weight_decay = 0.1f;
  cfg.grad_scale_from = &scale;
  adamw_step(cpu_ec, p, g, m, v, cfg);
  cfg.grad_scale_from = &gscale;
  adamw_step(gec, gp, gg, gm, gv, cfg);
  EXPECT_TRUE(bitwise_equal(p, gp));
  EXPECT_TRUE(bitwise_equal(m, gm));
  const Tensor gnan = gpu(Tensor::from({1}, std::vector<float>{std::nanf("")}));
  cfg.grad_scale_from = &gnan;
  cfg.step = 2;
  adamw_step(gec, gp, gg, gm, gv, cfg);
  EXPECT_TRUE(bitwise_equal(p, gp));  // skipped: still step 1's values
  EXPECT_TRUE(bitwise_equal(v, gv));

  const std::vector<Tensor> xs = {random_tensor({5}, 3), random_tensor({70001}, 4, -3, 3),
                                  Tensor::zeros({0}), random_tensor({1 << 20}, 5)};
  std::vector<Tensor> gxs;
  for (const Tensor& x : xs) gxs.push_back(gpu(x));
  double expected = 0;
  for (double s : sum_of_squares_multi(gec, gxs)) expected += s;
  Tensor gtotal = gpu(Tensor::zeros({1}, DType::f64));
  sum_of_squares_total(gec, gxs, gtotal);
  EXPECT_EQ(host(gtotal).data<double>()[0], expected);
}

}  // namespace
}  // namespace weft::kernels
