// Grouped-query attention (AttentionConfig::kv_heads): the fused CPU kernels
// against a naive fp64 reference that repeats each key/value head for the
// query heads that read it (h mod Hkv), forward and backward, f32 and bf16,
// batch- and sequence-major, with and without dropout; and against the
// multi-head kernels on explicitly repeated K and V.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "testing.h"
#include "weft/kernels/attention.h"

namespace weft::kernels {
namespace {

const ExecContext& ec = ExecContext::host();

using weft::testing::close;
using weft::testing::error_of;
using weft::testing::finite_difference;
using weft::testing::random_tensor;
using weft::testing::weighted_sum;

struct Case {
  int64_t B, T, H, Hkv, D;
};

Shape tokens(const Case& c, bool sequence_major, int64_t width) {
  return sequence_major ? Shape{c.T, c.B, width} : Shape{c.B, c.T, width};
}
int64_t qkv_width(const Case& c) { return (c.H + 2 * c.Hkv) * c.D; }

std::vector<double> doubles(const Tensor& t) {
  std::vector<float> v = t.to_vector();
  return {v.begin(), v.end()};
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// Naive fp64 attention over the packed GQA layout, the dropout mask (B,H,T,T)
// given (empty: none). Query head h reads key/value head h mod Hkv.
struct Reference {
  Case c;
  bool sequence_major = false;
  bool causal = true;
  double p = 0.0;
  std::vector<double> keep;

  size_t at(int64_t b, int64_t t, int64_t col, int64_t width) const {
    const int64_t row = sequence_major ? t * c.B + b : b * c.T + t;
    return static_cast<size_t>(row * width + col);
  }
  size_t sq(int64_t b, int64_t h, int64_t t, int64_t j) const {
    return static_cast<size_t>(((b * c.H + h) * c.T + t) * c.T + j);
  }
  int64_t qcol(int64_t h) const { return h * c.D; }
  int64_t kcol(int64_t h) const { return (c.H + h % c.Hkv) * c.D; }
  int64_t vcol(int64_t h) const { return (c.H + c.Hkv + h % c.Hkv) * c.D; }
  bool visible(int64_t t, int64_t j) const { return !causal || j <= t; }
  double drop(size_t i) const { return keep.empty() ? 1.0 : keep[i] / (1.0 - p); }

  // The probabilities (B,H,T,T) and the row logsumexps (B,H,T).
  void softmax(const std::vector<double>& x, std::vector<double>& P,
               std::vector<double>& lse) const {
    const int64_t W = qkv_width(c);
    P.assign(static_cast<size_t>(c.B * c.H * c.T * c.T), 0.0);
    lse.assign(static_cast<size_t>(c.B * c.H * c.T), 0.0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.H; ++h)
        for (int64_t t = 0; t < c.T; ++t) {
          double sum = 0;
          for (int64_t j = 0; j <= (causal ? t : c.T - 1); ++j) {
            double dot = 0;
            for (int64_t k = 0; k < c.D; ++k) {
              dot += x[at(b, t, qcol(h) + k, W)] * x[at(b, j, kcol(h) + k, W)];
            }
            P[sq(b, h, t, j)] = std::exp(dot * scale);
            sum += P[sq(b, h, t, j)];
          }
          for (int64_t j = 0; j < c.T; ++j) P[sq(b, h, t, j)] /= sum;
          lse[static_cast<size_t>((b * c.H + h) * c.T + t)] = std::log(sum);
        }
  }

  std::vector<double> forward(const std::vector<double>& x) const {
    std::vector<double> P, lse;
    softmax(x, P, lse);
    const int64_t W = qkv_width(c), C = c.H * c.D;
    std::vector<double> out(static_cast<size_t>(c.B * c.T * C), 0.0);
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.H; ++h)
        for (int64_t t = 0; t < c.T; ++t)
          for (int64_t k = 0; k < c.D; ++k) {
            double acc = 0;
            for (int64_t j = 0; j < c.T; ++j) {
              acc += P[sq(b, h, t, j)] * drop(sq(b, h, t, j)) * x[at(b, j, vcol(h) + k, W)];
            }
            out[at(b, t, h * c.D + k, C)] = acc;
          }
    return out;
  }

  std::vector<double> backward(const std::vector<double>& x,
                               const std::vector<double>& dout) const {
    std::vector<double> P, lse;
    softmax(x, P, lse);
    std::vector<double> dx(x.size(), 0.0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
    const int64_t W = qkv_width(c), C = c.H * c.D;
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.H; ++h)
        for (int64_t t = 0; t < c.T; ++t) {
          std::vector<double> dP(static_cast<size_t>(c.T), 0.0);
          double dot = 0;
          for (int64_t j = 0; j < c.T; ++j) {
            const size_t i = sq(b, h, t, j);
            double dw = 0;
            for (int64_t k = 0; k < c.D; ++k) {
              dw += dout[at(b, t, h * c.D + k, C)] * x[at(b, j, vcol(h) + k, W)];
              dx[at(b, j, vcol(h) + k, W)] += P[i] * drop(i) * dout[at(b, t, h * c.D + k, C)];
            }
            dP[static_cast<size_t>(j)] = dw * drop(i);
            dot += P[i] * dP[static_cast<size_t>(j)];
          }
          for (int64_t j = 0; j < c.T; ++j) {
            const double ds = P[sq(b, h, t, j)] * (dP[static_cast<size_t>(j)] - dot) * scale;
            for (int64_t k = 0; k < c.D; ++k) {
              dx[at(b, t, qcol(h) + k, W)] += ds * x[at(b, j, kcol(h) + k, W)];
              dx[at(b, j, kcol(h) + k, W)] += ds * x[at(b, t, qcol(h) + k, W)];
            }
          }
        }
    return dx;
  }

  std::vector<double> logsumexp(const std::vector<double>& x) const {
    std::vector<double> P, lse;
    softmax(x, P, lse);
    return lse;
  }
};

struct Result {
  Tensor out, dqkv;
  AttentionSaved saved;
};

Result run(const Tensor& qkv, const Tensor& dout, const AttentionConfig& cfg) {
  Result r;
  AttentionWorkspace ws;
  r.out = Tensor::empty(dout.shape(), qkv.dtype());
  r.dqkv = Tensor::empty(qkv.shape(), qkv.dtype());
  attention_forward(ec, qkv, cfg, r.out, r.saved, ws);
  attention_backward(ec, dout, qkv, r.saved, cfg, r.dqkv, ws);
  return r;
}

// Every head layout, length (below, at and past the forward's 64-row and the
// backward's 128-key and 256-row blocks) and layout in f32 and bf16, with and
// without dropout.
void expect_reference(const Case& c, DType dt, bool sequence_major, bool causal, float dropout) {
  SCOPED_TRACE(::testing::Message()
               << "B " << c.B << " T " << c.T << " H " << c.H << " Hkv " << c.Hkv << " D " << c.D
               << " " << dtype_name(dt) << (sequence_major ? " sequence-major" : "") << " causal "
               << causal << " dropout " << dropout);
  const AttentionConfig cfg{.heads = c.H,
                            .kv_heads = c.Hkv,
                            .dropout = dropout,
                            .seed = 31,
                            .offset = 9,
                            .causal = causal,
                            .sequence_major = sequence_major};
  const Tensor qkv = random_tensor(tokens(c, sequence_major, qkv_width(c)), 60, -2, 2, dt);
  const Tensor dout = random_tensor(tokens(c, sequence_major, c.H * c.D), 61, -1, 1, dt);
  const Result r = run(qkv, dout, cfg);
  Reference ref{c, sequence_major, causal, dropout, {}};
  if (dropout > 0) ref.keep = doubles(attention_dropout_mask(ec, cfg, c.B, c.T));
  const std::vector<double> out = ref.forward(doubles(qkv));
  const std::vector<double> dqkv = ref.backward(doubles(qkv), doubles(dout));
  ASSERT_EQ(r.saved.lse.shape(), (Shape{c.B, c.H, c.T}));
  ASSERT_EQ(r.dqkv.shape(), qkv.shape());
  // Errors against the scale of the terms summed (the largest element), as
  // cuda_attention_test.cpp measures them: dK and dV sum over query heads,
  // and bf16 rounds the weights and dS.
  const bool f32 = dt == DType::f32;
  const weft::testing::Tolerance tol = f32 ? weft::testing::kF32 : weft::testing::kBF16;
  EXPECT_TRUE(close(out, r.out.to_vector(), tol, max_abs(out))) << "out";
  EXPECT_TRUE(close(ref.logsumexp(doubles(qkv)), r.saved.lse.to_vector(), weft::testing::kF32,
                    f32 ? 0.0 : 1.0))
      << "lse";
  EXPECT_TRUE(close(dqkv, r.dqkv.to_vector(), tol, max_abs(dqkv))) << "dqkv";
}

const Case kCases[] = {{2, 7, 4, 2, 8},  {1, 1, 2, 1, 8},   {2, 33, 6, 3, 8},
                       {1, 65, 4, 1, 4}, {1, 300, 4, 2, 4}, {2, 17, 8, 2, 16}};

TEST(AttentionGqa, MatchesReferenceF32) {
  for (const Case& c : kCases) expect_reference(c, DType::f32, false, true, 0.0f);
}

TEST(AttentionGqa, MatchesReferenceBf16) {
  for (const Case& c : kCases) expect_reference(c, DType::bf16, false, true, 0.0f);
}

TEST(AttentionGqa, SequenceMajorNonCausalAndDropoutMatchReference) {
  for (const Case& c : {Case{2, 9, 4, 2, 8}, Case{1, 260, 3, 1, 4}})
    for (DType dt : {DType::f32, DType::bf16})
      for (bool sequence_major : {false, true})
        for (bool causal : {true, false})
          for (float p : {0.0f, 0.2f}) expect_reference(c, dt, sequence_major, causal, p);
}

// f32 finite differences of a sum of O(1) terms carry errors near 1e-4.
constexpr weft::testing::Tolerance kFiniteDifference{2e-3, 2e-4};

TEST(AttentionGqa, BackwardMatchesFiniteDifferences) {
  for (const Case& c : {Case{2, 5, 4, 2, 4}, Case{1, 6, 3, 1, 4}})
    for (float p : {0.0f, 0.3f}) {
      SCOPED_TRACE(::testing::Message() << "H " << c.H << " Hkv " << c.Hkv << " dropout " << p);
      Tensor qkv = random_tensor(tokens(c, false, qkv_width(c)), 62);
      const Tensor w = random_tensor(tokens(c, false, c.H * c.D), 63);
      const AttentionConfig cfg{.heads = c.H, .kv_heads = c.Hkv, .dropout = p, .seed = 5};
      AttentionSaved saved;
      AttentionWorkspace ws;
      Tensor out = Tensor::empty(w.shape());
      auto loss = [&] {
        attention_forward(ec, qkv, cfg, out, saved, ws);
        return weighted_sum(out, w);
      };
      // A wider step than the default: the f32 loss sums B·T·H·D products,
      // whose rounding the default step amplifies past the tolerance.
      const std::vector<double> fd = finite_difference(qkv, loss, 4e-3);
      EXPECT_TRUE(close(fd, run(qkv, w, cfg).dqkv.to_vector(), kFiniteDifference));
    }
}

// A multi-head qkv whose head h has the key and value of GQA head h mod Hkv.
Tensor repeat_kv(const Tensor& qkv, const Case& c) {
  const int64_t rows = c.B * c.T, W = qkv_width(c), C = c.H * c.D;
  std::vector<float> v = qkv.to_vector(), m(static_cast<size_t>(rows * 3 * C));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t k = 0; k < c.D; ++k) {
        const auto src = [&](int64_t col) { return v[static_cast<size_t>(r * W + col + k)]; };
        const auto dst = [&](int64_t col) -> float& {
          return m[static_cast<size_t>(r * 3 * C + col + k)];
        };
        dst(h * c.D) = src(h * c.D);
        dst(C + h * c.D) = src((c.H + h % c.Hkv) * c.D);
        dst(2 * C + h * c.D) = src((c.H + c.Hkv + h % c.Hkv) * c.D);
      }
  return Tensor::from({c.B, c.T, 3 * C}, m, qkv.dtype());
}

TEST(AttentionGqa, EqualsMultiHeadOnRepeatedKeysAndValues) {
  const Case c{2, 70, 6, 2, 8};
  for (DType dt : {DType::f32, DType::bf16})
    for (float p : {0.0f, 0.1f}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " dropout " << p);
      const Tensor qkv = random_tensor(tokens(c, false, qkv_width(c)), 64, -2, 2, dt);
      const Tensor dout = random_tensor(tokens(c, false, c.H * c.D), 65, -1, 1, dt);
      const AttentionConfig gqa{.heads = c.H, .kv_heads = c.Hkv, .dropout = p, .seed = 8};
      const AttentionConfig mha{.heads = c.H, .dropout = p, .seed = 8};
      const Result g = run(qkv, dout, gqa), m = run(repeat_kv(qkv, c), dout, mha);
      // The same products on the same numbers: the forward is bitwise the same.
      EXPECT_EQ(g.out.to_vector(), m.out.to_vector());
      EXPECT_EQ(g.saved.lse.to_vector(), m.saved.lse.to_vector());
      // dK and dV of a key/value head: the sums of the multi-head gradients of
      // its query heads; dQ: the same.
      const int64_t rows = c.B * c.T, W = qkv_width(c), C = c.H * c.D;
      const std::vector<float> md = m.dqkv.to_vector();
      std::vector<double> want(static_cast<size_t>(rows * W), 0.0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t h = 0; h < c.H; ++h)
          for (int64_t k = 0; k < c.D; ++k) {
            const auto mcol = [&](int64_t col) {
              return md[static_cast<size_t>(r * 3 * C + col + k)];
            };
            want[static_cast<size_t>(r * W + h * c.D + k)] = mcol(h * c.D);
            want[static_cast<size_t>(r * W + (c.H + h % c.Hkv) * c.D + k)] += mcol(C + h * c.D);
            want[static_cast<size_t>(r * W + (c.H + c.Hkv + h % c.Hkv) * c.D + k)] +=
                mcol(2 * C + h * c.D);
          }
      const weft::testing::Tolerance tol =
          dt == DType::f32 ? weft::testing::kF32 : weft::testing::kBF16;
      EXPECT_TRUE(close(want, g.dqkv.to_vector(), tol, max_abs(want)));
    }
}

TEST(AttentionGqa, KvHeadsEqualToHeadsIsMultiHead) {
  const Case c{2, 40, 4, 4, 8};
  for (DType dt : {DType::f32, DType::bf16}) {
    const Tensor qkv = random_tensor(tokens(c, false, qkv_width(c)), 66, -2, 2, dt);
    const Tensor dout = random_tensor(tokens(c, false, c.H * c.D), 67, -1, 1, dt);
    const Result a = run(qkv, dout, {.heads = 4, .dropout = 0.1f, .seed = 3});
    const Result b = run(qkv, dout, {.heads = 4, .kv_heads = 4, .dropout = 0.1f, .seed = 3});
    EXPECT_EQ(a.out.to_vector(), b.out.to_vector());
    EXPECT_EQ(a.dqkv.to_vector(), b.dqkv.to_vector());
  }
}

TEST(AttentionGqa, RejectsBadHeadCounts) {
  AttentionSaved saved;
  AttentionWorkspace ws;
  // H = 4, Hkv = 2, D = 4: (4 + 4)·4 = 32 columns.
  const Tensor qkv = Tensor::zeros({1, 3, 32});
  Tensor out = Tensor::empty({1, 3, 16});
  EXPECT_NO_THROW(attention_forward(ec, qkv, {.heads = 4, .kv_heads = 2}, out, saved, ws));
  // 4 query heads cannot share 3 key/value heads evenly.
  const Tensor qkv3 = Tensor::zeros({1, 3, 40});
  std::string e =
      error_of([&] { attention_forward(ec, qkv3, {.heads = 4, .kv_heads = 3}, out, saved, ws); });
  EXPECT_NE(e.find("multiple of kv_heads"), std::string::npos) << e;
  e = error_of([&] { attention_forward(ec, qkv, {.heads = 2, .kv_heads = 4}, out, saved, ws); });
  EXPECT_NE(e.find("kv_heads must lie in"), std::string::npos) << e;
  e = error_of([&] { attention_forward(ec, qkv, {.heads = 4, .kv_heads = -1}, out, saved, ws); });
  EXPECT_NE(e.find("kv_heads must lie in"), std::string::npos) << e;
  // 30 columns are no (4 + 2·2)·D.
  const Tensor ragged = Tensor::zeros({1, 3, 30});
  e = error_of([&] { attention_forward(ec, ragged, {.heads = 4, .kv_heads = 2}, out, saved, ws); });
  EXPECT_NE(e.find("(H + 2·Hkv)·D"), std::string::npos) << e;
  // The output has H·D columns, not Hkv·D or 3·C / 3.
  Tensor narrow = Tensor::empty({1, 3, 8});
  EXPECT_THROW(attention_forward(ec, qkv, {.heads = 4, .kv_heads = 2}, narrow, saved, ws), Error);
  // Backward checks dqkv against qkv's GQA shape.
  Tensor dout = Tensor::zeros({1, 3, 16}), wrong = Tensor::empty({1, 3, 48});
  EXPECT_THROW(attention_backward(ec, dout, qkv, saved, {.heads = 4, .kv_heads = 2}, wrong, ws),
               Error);
}

}  // namespace
}  // namespace weft::kernels
