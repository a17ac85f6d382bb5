// The step's device scalars (kernels/step_scalars.h), AdamW reading its
// gradient scale from a tensor, the one-tensor sum of squares and the loss
// left in a tensor: each against the host arithmetic it replaces, bit for bit.
#include "weft/kernels/step_scalars.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "bitwise.h"
#include "testing.h"
#include "weft/kernels/loss.h"
#include "weft/kernels/optimizer.h"
#include "weft/optim/grad_norm.h"

namespace weft::kernels {
namespace {

using weft::testing::bitwise_equal;
using weft::testing::random_tensor;

const ExecContext& ec = ExecContext::host();

Tensor f32(std::vector<float> v) { return Tensor::from({static_cast<int64_t>(v.size())}, v); }
Tensor f64(double v) {
  Tensor t = Tensor::empty({1}, DType::f64);
  *t.data<double>() = v;
  return t;
}

TEST(StepScalars, AccumulateAddsInF64AndResetStartsOver) {
  Tensor acc = f64(123.0);
  const std::vector<float> losses = {2.5f, 1.0f / 3.0f, 7.25f};
  double expected = 0;
  for (size_t i = 0; i < losses.size(); ++i) {
    accumulate_scalar(ec, f32({losses[i], 99.0f}), acc, /*reset=*/i == 0);
    expected += static_cast<double>(losses[i]);
  }
  EXPECT_EQ(*acc.data<double>(), expected);
}

TEST(StepScalars, FinishMeanRoundsOnceAndKeepsTheSecondValue) {
  Tensor out = f32({0, 0});
  finish_mean(ec, f64(10.0), 3.0, 0.125f, out);
  EXPECT_EQ(out.data<float>()[0], static_cast<float>(10.0 / 3.0));
  EXPECT_EQ(out.data<float>()[1], 0.125f);
  EXPECT_THROW(finish_mean(ec, f64(1.0), 0.0, 0.0f, out), Error);
}

TEST(StepScalars, ClipScaleIsOptimClipScaleAndNanForANonFiniteStep) {
  struct Case {
    float loss;
    double sum, max_norm;
  };
  const double inf = std::numeric_limits<double>::infinity();
  for (const Case& c : std::vector<Case>{{2.0f, 4.0, 1.0},
                                         {2.0f, 0.25, 1.0},
                                         {2.0f, 9.0, 0.0},
                                         {2.0f, -1e-30, 1.0},
                                         {2.0f, 1e10, 3.0}}) {
    Tensor norm = f64(c.sum), scale = f32({0});
    clip_scale(ec, f32({c.loss, 0}), norm, c.max_norm, scale);
    const double expected_norm = std::sqrt(std::max(c.sum, 0.0));
    EXPECT_EQ(*norm.data<double>(), expected_norm);
    EXPECT_EQ(*scale.data<float>(), optim::clip_scale(expected_norm, c.max_norm));
  }
  for (const Case& c : std::vector<Case>{{std::numeric_limits<float>::quiet_NaN(), 4.0, 1.0},
                                         {std::numeric_limits<float>::infinity(), 4.0, 0.0},
                                         {2.0f, inf, 1.0},
                                         {2.0f, std::nan(""), 0.0}}) {
    Tensor norm = f64(c.sum), scale = f32({0});
    clip_scale(ec, f32({c.loss}), norm, c.max_norm, scale);
    EXPECT_TRUE(std::isnan(*scale.data<float>())) << c.loss << " " << c.sum;
  }
}

TEST(StepScalars, AdamwReadsItsGradScaleFromATensorAndANanSkipsTheStep) {
  const int64_t n = 1000;
  const Tensor p0 = random_tensor({n}, 1), g = random_tensor({n}, 2, -2, 2);
  AdamWConfig cfg;
  cfg.lr = 1e-2f;
  cfg.weight_decay = 0.1f;
  cfg.grad_scale = 0.37f;
  Tensor p = p0.clone(), m = Tensor::zeros({n}), v = Tensor::zeros({n});
  adamw_step(ec, p, g, m, v, cfg);
  Tensor q = p0.clone(), qm = Tensor::zeros({n}), qv = Tensor::zeros({n});
  const Tensor scale = f32({0.37f});
  AdamWConfig from = cfg;
  from.grad_scale = 1.0f;
  from.grad_scale_from = &scale;
  adamw_step(ec, q, g, qm, qv, from);
  EXPECT_TRUE(bitwise_equal(p, q));
  EXPECT_TRUE(bitwise_equal(m, qm));
  EXPECT_TRUE(bitwise_equal(v, qv));

  const Tensor nan = f32({std::numeric_limits<float>::quiet_NaN()});
  from.grad_scale_from = &nan;
  const Tensor q_before = q.clone(), m_before = qm.clone(), v_before = qv.clone();
  AdamWSegment seg{.params = &q, .grads = &g, .m = &qm, .v = &qv, .decay = true};
  adamw_step_multi(ec, std::span(&seg, 1), from);
  EXPECT_TRUE(bitwise_equal(q, q_before));
  EXPECT_TRUE(bitwise_equal(qm, m_before));
  EXPECT_TRUE(bitwise_equal(qv, v_before));

  const Tensor wrong = Tensor::zeros({2});
  from.grad_scale_from = &wrong;
  EXPECT_THROW(adamw_step(ec, q, g, qm, qv, from), Error);
}

TEST(StepScalars, SumOfSquaresTotalAddsTheTensorsInOrder) {
  const std::vector<Tensor> xs = {random_tensor({5}, 3), random_tensor({70001}, 4, -3, 3),
                                  Tensor::zeros({0}), random_tensor({3, 17}, 5)};
  double expected = 0;
  for (double s : sum_of_squares_multi(ec, xs)) expected += s;
  Tensor total = f64(-1.0);
  sum_of_squares_total(ec, xs, total);
  EXPECT_EQ(*total.data<double>(), expected);
  sum_of_squares_total(ec, std::span<const Tensor>(), total);
  EXPECT_EQ(*total.data<double>(), 0.0);
}

TEST(StepScalars, LossTensorHoldsTheMeanAndTheScoredRows) {
  const int64_t rows = 9, vocab = 13;
  const Tensor logits = random_tensor({rows, vocab}, 6, -4, 4);
  std::vector<int32_t> t = {0, 3, kIgnoreIndex, 12, 5, kIgnoreIndex, 7, 1, 2};
  const Tensor targets = Tensor::from_i32({rows}, t);
  Tensor lse = Tensor::empty({rows}), lse2 = Tensor::empty({rows});
  const float mean = cross_entropy_forward(ec, logits, targets, lse);
  Tensor loss = Tensor::empty({2});
  CrossEntropyOptions checked;
  checked.targets_checked = true;
  cross_entropy_forward(ec, logits, targets, lse2, loss, checked);
  EXPECT_EQ(loss.data<float>()[0], mean);
  EXPECT_EQ(loss.data<float>()[1], 7.0f);
  EXPECT_TRUE(bitwise_equal(lse, lse2));
  // The backward scaled by the forward's count equals the one that counts.
  Tensor d1 = Tensor::empty({rows, vocab}), d2 = Tensor::empty({rows, vocab});
  cross_entropy_backward(ec, logits, targets, lse, 0.5f, d1);
  CrossEntropyOptions counted = checked;
  counted.counted = &loss;
  cross_entropy_backward(ec, logits, targets, lse, 0.5f, d2, counted);
  EXPECT_TRUE(bitwise_equal(d1, d2));
  Tensor bad = Tensor::empty({3});
  EXPECT_THROW(cross_entropy_forward(ec, logits, targets, lse2, bad), Error);
}

}  // namespace
}  // namespace weft::kernels
