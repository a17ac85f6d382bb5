#include "weft/kernels/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "testing.h"
#include "weft/core/threads.h"

namespace weft::kernels {
namespace {

// The host context: the calling thread's CPU threads.
const ExecContext& ec = ExecContext::host();

using weft::testing::close;
using weft::testing::kF32;
using weft::testing::random_tensor;

// The textbook AdamW (decoupled weight decay, bias correction) in fp64.
struct ReferenceAdamW {
  std::vector<double> p, m, v;

  void step(const std::vector<float>& grad, const AdamWConfig& c) {
    const double b1 = c.beta1, b2 = c.beta2, lr = c.lr;
    for (size_t i = 0; i < p.size(); ++i) {
      const double g = static_cast<double>(grad[i]) * c.grad_scale;
      p[i] -= lr * c.weight_decay * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double m_hat = m[i] / (1 - std::pow(b1, c.step));
      const double v_hat = v[i] / (1 - std::pow(b2, c.step));
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + c.eps);
    }
  }
};

std::vector<double> widen(const Tensor& t) {
  std::vector<float> v = t.to_vector();
  return {v.begin(), v.end()};
}

TEST(AdamW, MatchesFp64ReferenceOverSeveralSteps) {
  const int64_t n = 1000;
  Tensor p = random_tensor({10, 100}, 1);
  Tensor m = Tensor::zeros({10, 100});
  Tensor v = Tensor::zeros({10, 100});
  ReferenceAdamW ref{widen(p), std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  AdamWConfig cfg{.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
  for (int64_t step = 1; step <= 6; ++step) {
    Tensor g = random_tensor({10, 100}, static_cast<uint32_t>(100 + step), -2.0f, 2.0f);
    cfg.step = step;
    cfg.grad_scale = step == 4 ? 0.25f : 1.0f;
    adamw_step(ec, p, g, m, v, cfg);
    ref.step(g.to_vector(), cfg);
    EXPECT_TRUE(close(ref.p, p.to_vector(), kF32)) << "step " << step;
    EXPECT_TRUE(close(ref.m, m.to_vector(), kF32)) << "step " << step;
    EXPECT_TRUE(close(ref.v, v.to_vector(), kF32)) << "step " << step;
  }
}

TEST(AdamW, FirstStepMovesEachWeightByLr) {
  // Bias correction makes the first update lr · g / (|g| + eps).
  Tensor p = Tensor::from({4}, std::vector<float>{1.0f, -2.0f, 0.5f, 0.0f});
  Tensor g = Tensor::from({4}, std::vector<float>{0.3f, -7.0f, 1e-3f, -0.02f});
  Tensor m = Tensor::zeros({4}), v = Tensor::zeros({4});
  adamw_step(ec, p, g, m, v, {.lr = 0.01f});
  EXPECT_TRUE(close({0.99, -1.99, 0.49, 0.01}, p.to_vector(), kF32));
}

TEST(AdamW, WeightDecayIsDecoupledFromTheGradient) {
  // With a zero gradient the moments stay zero and only the decay acts.
  Tensor p = random_tensor({64}, 2);
  std::vector<float> before = p.to_vector();
  Tensor g = Tensor::zeros({64}), m = Tensor::zeros({64}), v = Tensor::zeros({64});
  adamw_step(ec, p, g, m, v, {.lr = 0.1f, .weight_decay = 0.5f, .step = 3});
  std::vector<double> expected;
  for (float x : before) expected.push_back(x * (1.0 - 0.1 * 0.5));
  EXPECT_TRUE(close(expected, p.to_vector(), kF32));
  for (float x : m.to_vector()) EXPECT_EQ(x, 0.0f);
  for (float x : v.to_vector()) EXPECT_EQ(x, 0.0f);
}

TEST(AdamW, GradScaleEqualsScaledGradient) {
  Tensor p1 = random_tensor({300}, 3), p2 = p1.clone();
  Tensor g = random_tensor({300}, 4);
  std::vector<float> half = g.to_vector();
  for (float& x : half) x *= 0.5f;  // exact: a power of two
  Tensor m1 = Tensor::zeros({300}), v1 = Tensor::zeros({300});
  Tensor m2 = Tensor::zeros({300}), v2 = Tensor::zeros({300});
  adamw_step(ec, p1, g, m1, v1, {.weight_decay = 0.01f, .grad_scale = 0.5f});
  adamw_step(ec, p2, Tensor::from({300}, half), m2, v2, {.weight_decay = 0.01f});
  EXPECT_EQ(p1.to_vector(), p2.to_vector());
  EXPECT_EQ(m1.to_vector(), m2.to_vector());
  EXPECT_EQ(v1.to_vector(), v2.to_vector());
}

TEST(AdamW, IsTheSameForAnyThreadCount) {
  const int64_t n = 100003;  // large enough to run in parallel, not a multiple of anything
  Tensor p0 = random_tensor({n}, 5), g = random_tensor({n}, 6);
  auto run = [&](int threads) {
    set_num_threads(threads);
    Tensor p = p0.clone(), m = Tensor::zeros({n}), v = Tensor::zeros({n});
    for (int64_t step = 1; step <= 3; ++step) {
      adamw_step(ec, p, g, m, v, {.lr = 3e-3f, .weight_decay = 0.1f, .step = step});
    }
    set_num_threads(0);
    std::vector<float> all = p.to_vector(), mv = m.to_vector(), vv = v.to_vector();
    all.insert(all.end(), mv.begin(), mv.end());
    all.insert(all.end(), vv.begin(), vv.end());
    return all;
  };
  std::vector<float> one = run(1);
  EXPECT_EQ(one, run(2));
  EXPECT_EQ(one, run(5));
}

TEST(AdamW, RejectsBadInputs) {
  Tensor p = Tensor::zeros({8}), g = Tensor::zeros({8}), m = Tensor::zeros({8});
  Tensor v = Tensor::zeros({8});
  Tensor short_v = Tensor::zeros({7});
  Tensor bf16_p = Tensor::zeros({8}, DType::bf16);
  EXPECT_THROW(adamw_step(ec, p, g, m, short_v, {}), weft::Error);
  EXPECT_THROW(adamw_step(ec, bf16_p, g, m, v, {}), weft::Error);
  EXPECT_THROW(adamw_step(ec, p, g.to(DType::bf16), m, v, {}), weft::Error);
  EXPECT_THROW(adamw_step(ec, p, g, m, v, {.step = 0}), weft::Error);
  EXPECT_THROW(adamw_step(ec, p, g, m, v, {.beta1 = 1.0f}), weft::Error);
  EXPECT_THROW(adamw_step(ec, p, g, m, v, {.lr = -1.0f}), weft::Error);
  EXPECT_THROW(adamw_step(ec, p, g, m, v, {.lr = NAN}), weft::Error);
}

TEST(SumOfSquares, MatchesFp64Reference) {
  for (int64_t n : {0, 1, 7, 8, 1000, 200001}) {
    Tensor x = random_tensor({n}, static_cast<uint32_t>(n + 1), -3.0f, 3.0f);
    double expected = 0;
    for (float e : x.to_vector()) expected += static_cast<double>(e) * e;
    EXPECT_NEAR(sum_of_squares(ec, x), expected, 1e-12 * expected) << n << " elements";
  }
}

TEST(SumOfSquares, IsTheSameForAnyThreadCount) {
  Tensor x = random_tensor({3, 100001}, 7);
  std::vector<double> results;
  for (int threads : {1, 2, 3, 8}) {
    set_num_threads(threads);
    results.push_back(sum_of_squares(ec, x));
  }
  set_num_threads(0);
  for (double r : results) EXPECT_EQ(r, results[0]);
}

TEST(SumOfSquares, RejectsNonF32) {
  EXPECT_THROW(sum_of_squares(ec, Tensor::zeros({4}, DType::bf16)), weft::Error);
}

}  // namespace
}  // namespace weft::kernels
