#include "weft/kernels/loss.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "testing.h"
#include "weft/core/threads.h"

namespace weft::kernels {
namespace {

// The host context: the calling thread's CPU threads.
const ExecContext& ec = ExecContext::host();

using weft::testing::close;
using weft::testing::finite_difference;
using weft::testing::kBF16;
using weft::testing::kF32;
using weft::testing::random_tensor;

// What an fp64 cross-entropy gives for the whole (N,V) logits.
struct Reference {
  double loss = 0;
  std::vector<double> lse;      // (N)
  std::vector<double> dlogits;  // (N,V)
};

Reference reference(const Tensor& logits, const std::vector<int32_t>& targets, double dloss,
                    int32_t ignore_index = -100, int64_t valid_vocab = 0) {
  const int64_t rows = logits.size(0), cols = logits.size(1);
  const int64_t valid = valid_vocab > 0 ? valid_vocab : cols;
  std::vector<float> x = logits.to_vector();
  Reference r;
  r.lse.resize(static_cast<size_t>(rows));
  r.dlogits.assign(static_cast<size_t>(rows * cols), 0.0);
  int64_t count = 0;
  for (int32_t t : targets) count += t != ignore_index;
  for (int64_t n = 0; n < rows; ++n) {
    const float* row = x.data() + n * cols;
    double s = 0;
    for (int64_t j = 0; j < valid; ++j) s += std::exp(static_cast<double>(row[j]));
    double lse = std::log(s);
    r.lse[static_cast<size_t>(n)] = lse;
    const int32_t t = targets[static_cast<size_t>(n)];
    if (t == ignore_index) continue;
    r.loss += (lse - row[t]) / static_cast<double>(count);
    for (int64_t j = 0; j < valid; ++j) {
      double p = std::exp(row[j] - lse) - (j == t ? 1.0 : 0.0);
      r.dlogits[static_cast<size_t>(n * cols + j)] = p * dloss / static_cast<double>(count);
    }
  }
  return r;
}

Tensor targets_tensor(const std::vector<int32_t>& t) {
  return Tensor::from_i32({static_cast<int64_t>(t.size())}, t);
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

TEST(CrossEntropy, ForwardMatchesFp64Reference) {
  Tensor logits = random_tensor({7, 37}, 1, -5.0f, 5.0f);
  std::vector<int32_t> t = {3, 0, 36, -100, 17, 17, 8};
  Tensor lse = Tensor::empty({7});
  float loss = cross_entropy_forward(ec, logits, targets_tensor(t), lse);
  Reference r = reference(logits, t, 1.0);
  EXPECT_TRUE(close({r.loss}, {loss}, kF32));
  EXPECT_TRUE(close(r.lse, lse.to_vector(), kF32));
}

TEST(CrossEntropy, BackwardMatchesFp64Reference) {
  Tensor logits = random_tensor({6, 41}, 2, -4.0f, 4.0f);
  std::vector<int32_t> t = {40, -100, 0, 5, 5, 22};
  Tensor lse = Tensor::empty({6});
  cross_entropy_forward(ec, logits, targets_tensor(t), lse);
  Tensor dlogits = Tensor::empty({6, 41});
  cross_entropy_backward(ec, logits, targets_tensor(t), lse, 1.7f, dlogits);
  EXPECT_TRUE(close(reference(logits, t, 1.7).dlogits, dlogits.to_vector(), kF32));
}

TEST(CrossEntropy, BackwardMatchesFiniteDifferences) {
  Tensor logits = random_tensor({4, 9}, 3, -2.0f, 2.0f);
  std::vector<int32_t> t = {1, 8, -100, 4};
  Tensor targets = targets_tensor(t);
  Tensor lse = Tensor::empty({4});
  const double dloss = 0.8;
  auto loss = [&] { return dloss * cross_entropy_forward(ec, logits, targets, lse); };
  std::vector<double> numeric = finite_difference(logits, loss, 1e-2);
  cross_entropy_forward(ec, logits, targets, lse);
  Tensor dlogits = Tensor::empty({4, 9});
  cross_entropy_backward(ec, logits, targets, lse, static_cast<float>(dloss), dlogits);
  // Central differences of an f32 loss: truncation O(eps²) and rounding
  // O(ulp(loss)/eps), both near 1e-5.
  EXPECT_TRUE(close(numeric, dlogits.to_vector(), {1e-3, 5e-5}));
}

TEST(CrossEntropy, IgnoredRowsGetZeroGradientAndAreNotCounted) {
  Tensor logits = random_tensor({5, 13}, 4, -3.0f, 3.0f);
  CrossEntropyOptions opt{.ignore_index = 7};
  std::vector<int32_t> t = {7, 2, 7, 12, 0};
  Tensor lse = Tensor::empty({5});
  float loss = cross_entropy_forward(ec, logits, targets_tensor(t), lse, opt);
  Reference r = reference(logits, t, 1.0, 7);
  EXPECT_TRUE(close({r.loss}, {loss}, kF32));
  EXPECT_EQ(count_targets(ec, targets_tensor(t), 7), 3);

  Tensor dlogits = Tensor::full({5, 13}, 99.0f);
  cross_entropy_backward(ec, logits, targets_tensor(t), lse, 1.0f, dlogits, opt);
  std::vector<float> d = dlogits.to_vector();
  for (int64_t n : {0, 2}) {
    for (int64_t j = 0; j < 13; ++j) EXPECT_EQ(d[static_cast<size_t>(n * 13 + j)], 0.0f);
  }
  EXPECT_TRUE(close(r.dlogits, d, kF32));
}

TEST(CrossEntropy, AllIgnoredGivesZeroLossAndGradient) {
  Tensor logits = random_tensor({3, 5}, 5);
  Tensor targets = targets_tensor({-100, -100, -100});
  Tensor lse = Tensor::empty({3});
  EXPECT_EQ(cross_entropy_forward(ec, logits, targets, lse), 0.0f);
  Tensor dlogits = Tensor::full({3, 5}, 1.0f);
  cross_entropy_backward(ec, logits, targets, lse, 1.0f, dlogits);
  for (float g : dlogits.to_vector()) EXPECT_EQ(g, 0.0f);
  for (float l : lse.to_vector()) EXPECT_TRUE(std::isfinite(l));
}

TEST(CrossEntropy, PaddedVocabColumnsNeverContribute) {
  const int64_t rows = 4, cols = 16, valid = 11;
  Tensor logits = random_tensor({rows, cols}, 6, -3.0f, 3.0f);
  // Padding holding huge values would dominate the softmax if it were read.
  float* x = logits.data<float>();
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t j = valid; j < cols; ++j) x[n * cols + j] = 1e4f;
  }
  std::vector<int32_t> t = {10, 0, -100, 3};
  CrossEntropyOptions opt{.valid_vocab = valid};
  Tensor lse = Tensor::empty({rows});
  float loss = cross_entropy_forward(ec, logits, targets_tensor(t), lse, opt);
  Reference r = reference(logits, t, 2.0, -100, valid);
  EXPECT_TRUE(close({r.loss}, {loss}, kF32));
  EXPECT_TRUE(close(r.lse, lse.to_vector(), kF32));

  Tensor dlogits = Tensor::full({rows, cols}, 5.0f);
  cross_entropy_backward(ec, logits, targets_tensor(t), lse, 2.0f, dlogits, opt);
  std::vector<float> d = dlogits.to_vector();
  for (int64_t n = 0; n < rows; ++n) {
    for (int64_t j = valid; j < cols; ++j) EXPECT_EQ(d[static_cast<size_t>(n * cols + j)], 0.0f);
  }
  EXPECT_TRUE(close(r.dlogits, d, kF32));

  // A target inside the padding is a data error.
  EXPECT_THROW(cross_entropy_forward(ec, logits, targets_tensor({11, 0, 0, 0}), lse, opt),
               weft::Error);
}

// Vocab-parallel cross-entropy assembled from the row-wise pieces of each
// slice (the all-reduces done here by hand) equals the whole computation.
TEST(CrossEntropy, VocabSlicesCombineToWhole) {
  const int64_t rows = 6, cols = 40, valid = 37, ranks = 4, local = cols / ranks;
  Tensor logits = random_tensor({rows, cols}, 7, -6.0f, 6.0f);
  std::vector<int32_t> t = {0, 9, 10, 36, -100, 25};
  Tensor targets = targets_tensor(t);
  CrossEntropyOptions whole_opt{.valid_vocab = valid};
  Tensor whole_lse = Tensor::empty({rows});
  float whole_loss = cross_entropy_forward(ec, logits, targets, whole_lse, whole_opt);
  Tensor whole_grad = Tensor::empty({rows, cols});
  cross_entropy_backward(ec, logits, targets, whole_lse, 1.0f, whole_grad, whole_opt);

  // Column slices of the logits, as each rank would hold them.
  std::vector<float> x = logits.to_vector();
  std::vector<Tensor> slices;
  for (int64_t r = 0; r < ranks; ++r) {
    std::vector<float> s;
    for (int64_t n = 0; n < rows; ++n) {
      for (int64_t j = 0; j < local; ++j)
        s.push_back(x[static_cast<size_t>(n * cols + r * local + j)]);
    }
    slices.push_back(Tensor::from({rows, local}, s));
  }
  auto slice_opt = [&](int64_t r) {
    return CrossEntropyOptions{.vocab_start = r * local, .valid_vocab = valid};
  };

  Tensor row_max = Tensor::full({rows}, -std::numeric_limits<float>::infinity());
  Tensor target_logit = Tensor::zeros({rows});
  Tensor sum_exp = Tensor::zeros({rows});
  Tensor piece = Tensor::empty({rows});
  for (int64_t r = 0; r < ranks; ++r) {
    cross_entropy_row_max(ec, slices[static_cast<size_t>(r)], piece, slice_opt(r));
    for (int64_t n = 0; n < rows; ++n) {
      row_max.data<float>()[n] = std::max(row_max.data<float>()[n], piece.data<float>()[n]);
    }
    cross_entropy_target_logit(ec, slices[static_cast<size_t>(r)], targets, piece, slice_opt(r));
    for (int64_t n = 0; n < rows; ++n) target_logit.data<float>()[n] += piece.data<float>()[n];
  }
  for (int64_t r = 0; r < ranks; ++r) {
    cross_entropy_sum_exp(ec, slices[static_cast<size_t>(r)], row_max, piece, slice_opt(r));
    for (int64_t n = 0; n < rows; ++n) sum_exp.data<float>()[n] += piece.data<float>()[n];
  }
  Tensor lse = Tensor::empty({rows});
  float loss = cross_entropy_combine(ec, row_max, sum_exp, target_logit, targets, lse);
  EXPECT_TRUE(close({whole_loss}, {loss}, kF32));
  EXPECT_TRUE(close(widen(whole_lse.to_vector()), lse.to_vector(), kF32));
  EXPECT_TRUE(close({reference(logits, t, 1.0, -100, valid).loss}, {loss}, kF32));

  // Each rank's slice of the gradient: given the same lse, exactly the
  // matching columns of the whole gradient; given the combined lse, close.
  std::vector<float> g = whole_grad.to_vector();
  for (int64_t r = 0; r < ranks; ++r) {
    Tensor exact = Tensor::empty({rows, local});
    cross_entropy_backward(ec, slices[static_cast<size_t>(r)], targets, whole_lse, 1.0f, exact,
                           slice_opt(r));
    Tensor combined = Tensor::empty({rows, local});
    cross_entropy_backward(ec, slices[static_cast<size_t>(r)], targets, lse, 1.0f, combined,
                           slice_opt(r));
    std::vector<double> expected;
    for (int64_t n = 0; n < rows; ++n) {
      for (int64_t j = 0; j < local; ++j) {
        expected.push_back(g[static_cast<size_t>(n * cols + r * local + j)]);
        EXPECT_EQ(exact.item(n * local + j), g[static_cast<size_t>(n * cols + r * local + j)]);
      }
    }
    EXPECT_TRUE(close(expected, combined.to_vector(), kF32));
  }
}

TEST(CrossEntropy, SliceOfOnlyPaddingIsNeutral) {
  Tensor logits = random_tensor({2, 4}, 8);
  CrossEntropyOptions opt{.vocab_start = 8, .valid_vocab = 6};
  Tensor targets = targets_tensor({5, 0});
  Tensor m = Tensor::empty({2}), z = Tensor::empty({2}), s = Tensor::empty({2});
  cross_entropy_row_max(ec, logits, m, opt);
  cross_entropy_target_logit(ec, logits, targets, z, opt);
  Tensor global_max = Tensor::zeros({2});
  cross_entropy_sum_exp(ec, logits, global_max, s, opt);
  for (int64_t n = 0; n < 2; ++n) {
    EXPECT_EQ(m.item(n), -std::numeric_limits<float>::infinity());
    EXPECT_EQ(z.item(n), 0.0f);
    EXPECT_EQ(s.item(n), 0.0f);
  }
  Tensor grad = Tensor::full({2, 4}, 3.0f);
  cross_entropy_backward(ec, logits, targets, Tensor::zeros({2}), 1.0f, grad, opt);
  for (float v : grad.to_vector()) EXPECT_EQ(v, 0.0f);
}

TEST(CrossEntropy, Bf16LogitsWithinBf16Tolerance) {
  Tensor logits = random_tensor({5, 29}, 9, -4.0f, 4.0f, DType::bf16);
  std::vector<int32_t> t = {28, 0, 13, -100, 13};
  Tensor lse = Tensor::empty({5});
  float loss = cross_entropy_forward(ec, logits, targets_tensor(t), lse);
  // The inputs are exact bf16 values and the arithmetic is f32.
  Reference r = reference(logits, t, 1.3);
  EXPECT_TRUE(close({r.loss}, {loss}, kF32));
  EXPECT_TRUE(close(r.lse, lse.to_vector(), kF32));
  Tensor dlogits = Tensor::empty({5, 29}, DType::bf16);
  cross_entropy_backward(ec, logits, targets_tensor(t), lse, 1.3f, dlogits);
  EXPECT_TRUE(close(r.dlogits, dlogits.to_vector(), kBF16));
  Tensor dlogits_f32 = Tensor::empty({5, 29});
  cross_entropy_backward(ec, logits, targets_tensor(t), lse, 1.3f, dlogits_f32);
  EXPECT_TRUE(close(r.dlogits, dlogits_f32.to_vector(), kF32));
}

TEST(CrossEntropy, BackwardInPlaceEqualsOutOfPlace) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    Tensor logits = random_tensor({4, 19}, 10, -3.0f, 3.0f, dtype);
    Tensor targets = targets_tensor({18, -100, 0, 7});
    Tensor lse = Tensor::empty({4});
    cross_entropy_forward(ec, logits, targets, lse);
    Tensor separate = Tensor::empty({4, 19}, dtype);
    cross_entropy_backward(ec, logits, targets, lse, 1.0f, separate);
    cross_entropy_backward(ec, logits, targets, lse, 1.0f, logits);
    EXPECT_EQ(separate.to_vector(), logits.to_vector());
  }
}

TEST(CrossEntropy, LargeLogitsStayFinite) {
  Tensor logits = random_tensor({3, 11}, 11, 1e4f, 1.0001e4f);
  logits.data<float>()[5] = 2e4f;
  std::vector<int32_t> t = {5, 2, 10};
  Tensor lse = Tensor::empty({3});
  float loss = cross_entropy_forward(ec, logits, targets_tensor(t), lse);
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_TRUE(close({reference(logits, t, 1.0).loss}, {loss}, kF32));
  Tensor dlogits = Tensor::empty({3, 11});
  cross_entropy_backward(ec, logits, targets_tensor(t), lse, 1.0f, dlogits);
  for (float g : dlogits.to_vector()) EXPECT_TRUE(std::isfinite(g));
}

// sum_exp of single-column rows against a zero maximum is e^x itself: the
// vectorized exp, checked across its range.
TEST(CrossEntropy, ExpIsAccurateAcrossItsRange) {
  const int64_t rows = 20001;
  std::vector<float> x(static_cast<size_t>(rows));
  std::vector<double> expected;
  for (int64_t n = 0; n < rows; ++n) {
    x[static_cast<size_t>(n)] = -86.9f + 174.8f * static_cast<float>(n) / (rows - 1);
    expected.push_back(std::exp(static_cast<double>(x[static_cast<size_t>(n)])));
  }
  Tensor s = Tensor::empty({rows});
  cross_entropy_sum_exp(ec, Tensor::from({rows, 1}, x), Tensor::zeros({rows}), s);
  EXPECT_TRUE(close(expected, s.to_vector(), {3e-7, 0.0}));  // 2.5 ulp
}

TEST(CrossEntropy, WideLogitRangeMatchesReference) {
  Tensor logits = random_tensor({8, 1000}, 16, -200.0f, 60.0f);
  std::vector<int32_t> t = {0, 999, 500, 1, 2, 3, -100, 777};
  Tensor lse = Tensor::empty({8});
  float loss = cross_entropy_forward(ec, logits, targets_tensor(t), lse);
  Reference r = reference(logits, t, 1.0);
  EXPECT_TRUE(close({r.loss}, {loss}, kF32));
  EXPECT_TRUE(close(r.lse, lse.to_vector(), kF32));
  Tensor dlogits = Tensor::empty({8, 1000});
  cross_entropy_backward(ec, logits, targets_tensor(t), lse, 1.0f, dlogits);
  EXPECT_TRUE(close(r.dlogits, dlogits.to_vector(), kF32));
}

TEST(CrossEntropy, NegativeInfinityLogitsAreMaskedOut) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor logits = random_tensor({2, 6}, 17, -2.0f, 2.0f);
  Tensor masked = logits.clone();
  masked.data<float>()[1] = -inf;
  masked.data<float>()[10] = -inf;
  std::vector<int32_t> t = {0, 3};
  Tensor lse = Tensor::empty({2});
  float loss = cross_entropy_forward(ec, masked, targets_tensor(t), lse);
  // The same as logits without the masked columns.
  double expected = 0;
  std::vector<float> x = logits.to_vector();
  for (int64_t n = 0; n < 2; ++n) {
    double s = 0;
    for (int64_t j = 0; j < 6; ++j) {
      if (n * 6 + j != 1 && n * 6 + j != 10)
        s += std::exp(static_cast<double>(x[static_cast<size_t>(n * 6 + j)]));
    }
    expected += (std::log(s) - x[static_cast<size_t>(n * 6 + t[static_cast<size_t>(n)])]) / 2;
  }
  EXPECT_TRUE(close({expected}, {loss}, kF32));
  Tensor dlogits = Tensor::empty({2, 6});
  cross_entropy_backward(ec, masked, targets_tensor(t), lse, 1.0f, dlogits);
  EXPECT_LT(std::abs(dlogits.item(1)), 1e-30f);
  EXPECT_LT(std::abs(dlogits.item(10)), 1e-30f);
}

TEST(CrossEntropy, NanLogitGivesNanLoss) {
  Tensor logits = random_tensor({3, 50}, 18);
  logits.data<float>()[60] = std::numeric_limits<float>::quiet_NaN();
  Tensor lse = Tensor::empty({3});
  float loss = cross_entropy_forward(ec, logits, targets_tensor({1, 2, 3}), lse);
  EXPECT_TRUE(std::isnan(loss));
  EXPECT_TRUE(std::isfinite(lse.item(0)));
  EXPECT_TRUE(std::isnan(lse.item(1)));
  Tensor dlogits = Tensor::empty({3, 50});
  cross_entropy_backward(ec, logits, targets_tensor({1, 2, 3}), lse, 1.0f, dlogits);
  EXPECT_TRUE(std::isnan(dlogits.item(50)));
  EXPECT_TRUE(std::isfinite(dlogits.item(0)));
}

TEST(CrossEntropy, LossIsTheSameForAnyThreadCount) {
  Tensor logits = random_tensor({64, 300}, 12, -5.0f, 5.0f);
  std::vector<int32_t> t(64);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>((i * 37) % 300);
  Tensor targets = targets_tensor(t);
  auto run = [&](int threads, Tensor& grad) {
    set_num_threads(threads);
    Tensor lse = Tensor::empty({64});
    float loss = cross_entropy_forward(ec, logits, targets, lse);
    cross_entropy_backward(ec, logits, targets, lse, 1.0f, grad);
    set_num_threads(0);
    return loss;
  };
  Tensor g1 = Tensor::empty({64, 300}), g2 = Tensor::empty({64, 300});
  EXPECT_EQ(run(1, g1), run(2, g2));
  EXPECT_EQ(g1.to_vector(), g2.to_vector());
}

// The local backend runs one rank per thread, each calling the kernels.
TEST(CrossEntropy, ConcurrentCallsAgree) {
  Tensor logits = random_tensor({32, 500}, 19, -5.0f, 5.0f);
  std::vector<int32_t> t(32);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>((i * 13) % 500);
  Tensor targets = targets_tensor(t);
  auto run = [&](float& loss, Tensor& grad) {
    set_num_threads(2);
    Tensor lse = Tensor::empty({32});
    loss = cross_entropy_forward(ec, logits, targets, lse);
    cross_entropy_backward(ec, logits, targets, lse, 1.0f, grad);
  };
  std::vector<float> losses(4);
  std::vector<Tensor> grads;
  for (int i = 0; i < 4; ++i) grads.push_back(Tensor::empty({32, 500}));
  std::vector<std::thread> ranks;
  for (size_t i = 0; i < 4; ++i) ranks.emplace_back(run, std::ref(losses[i]), std::ref(grads[i]));
  for (std::thread& r : ranks) r.join();
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(losses[i], losses[0]);
    EXPECT_EQ(grads[i].to_vector(), grads[0].to_vector());
  }
}

TEST(CrossEntropy, BadTargetNamesRowAndValue) {
  Tensor logits = random_tensor({3, 10}, 13);
  Tensor lse = Tensor::empty({3});
  for (int32_t bad : {10, -1, 1000}) {
    try {
      cross_entropy_forward(ec, logits, targets_tensor({0, 1, bad}), lse);
      FAIL() << "target " << bad << " was accepted";
    } catch (const weft::Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("row 2"), std::string::npos) << msg;
      EXPECT_NE(msg.find("target " + std::to_string(bad)), std::string::npos) << msg;
    }
  }
  Tensor grad = Tensor::empty({3, 10});
  EXPECT_THROW(cross_entropy_backward(ec, logits, targets_tensor({0, 10, 1}), lse, 1.0f, grad),
               weft::Error);
  Tensor z = Tensor::empty({3});
  EXPECT_THROW(cross_entropy_target_logit(ec, logits, targets_tensor({0, -5, 1}), z), weft::Error);
}

TEST(CrossEntropy, RejectsBadShapesAndTypes) {
  Tensor logits = random_tensor({3, 10}, 14);
  Tensor targets = targets_tensor({0, 1, 2});
  Tensor lse = Tensor::empty({3});
  Tensor grad = Tensor::empty({3, 10});
  Tensor short_lse = Tensor::empty({2});
  Tensor narrow_grad = Tensor::empty({3, 9});
  const CrossEntropyOptions slice{.vocab_start = 10, .valid_vocab = 20};
  const CrossEntropyOptions wider{.valid_vocab = 11};
  EXPECT_THROW(cross_entropy_forward(ec, logits.reshape({30}), targets, lse), weft::Error);
  EXPECT_THROW(cross_entropy_forward(ec, logits, targets_tensor({0, 1}), lse), weft::Error);
  EXPECT_THROW(cross_entropy_forward(ec, logits, Tensor::zeros({3}), lse), weft::Error);
  EXPECT_THROW(cross_entropy_forward(ec, logits, targets, short_lse), weft::Error);
  EXPECT_THROW(cross_entropy_forward(ec, logits.to(DType::i32), targets, lse), weft::Error);
  // The forward needs the whole vocabulary in its logits.
  EXPECT_THROW(cross_entropy_forward(ec, logits, targets, lse, slice), weft::Error);
  EXPECT_THROW(cross_entropy_forward(ec, logits, targets, lse, wider), weft::Error);
  EXPECT_THROW(cross_entropy_backward(ec, logits, targets, lse, 1.0f, narrow_grad), weft::Error);
  EXPECT_THROW(
      cross_entropy_backward(ec, logits, targets, Tensor::empty({3}, DType::bf16), 1.0f, grad),
      weft::Error);
  // Sharing storage with the logits is only allowed for exactly the logits.
  Tensor wide = random_tensor({4, 10}, 15);
  Tensor shifted = wide.narrow(1, 3);
  EXPECT_THROW(cross_entropy_backward(ec, wide.narrow(0, 3), targets, lse, 1.0f, shifted),
               weft::Error);
}

}  // namespace
}  // namespace weft::kernels
