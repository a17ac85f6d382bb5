#include "weft/kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "testing.h"
#include "weft/core/threads.h"
#include "weft/kernels/random.h"

namespace weft::kernels {
namespace {

// The host context: the calling thread's CPU threads.
const ExecContext& ec = ExecContext::host();

using weft::testing::close;
using weft::testing::finite_difference;
using weft::testing::random_tensor;
using weft::testing::weighted_sum;

// Restores the default thread count when a test ends, whatever it set.
struct ThreadsGuard {
  ~ThreadsGuard() { set_num_threads(0); }
};

struct Case {
  int64_t B, T, H, D;
};

Shape qkv_shape(const Case& c) { return {c.B, c.T, 3 * c.H * c.D}; }
Shape out_shape(const Case& c) { return {c.B, c.T, c.H * c.D}; }

std::vector<double> doubles(const Tensor& t) {
  std::vector<float> v = t.to_vector();
  return {v.begin(), v.end()};
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (float v : t.to_vector()) m = std::max(m, static_cast<double>(std::abs(v)));
  return m;
}

// Naive fp64 attention over the same packed layout, written from the
// definition. keep (B,H,T,T) holds the dropout mask (empty: no dropout).
struct Reference {
  Case c;
  bool causal;
  double p;
  std::vector<double> keep;
  // query_position - key_position of a block of a longer sequence.
  int64_t shift = 0;

  explicit Reference(Case c_, bool causal_ = true, double p_ = 0.0, std::vector<double> keep_ = {})
      : c(c_), causal(causal_), p(p_), keep(std::move(keep_)) {}

  int64_t C() const { return c.H * c.D; }
  size_t at(int64_t b, int64_t t, int64_t col, int64_t width) const {
    return static_cast<size_t>((b * c.T + t) * width + col);
  }
  size_t sq(int64_t b, int64_t h, int64_t t, int64_t j) const {
    return static_cast<size_t>(((b * c.H + h) * c.T + t) * c.T + j);
  }
  bool visible(int64_t t, int64_t j) const { return !causal || j <= t + shift; }
  double drop(size_t i) const { return keep.empty() ? 1.0 : keep[i] / (1.0 - p); }

  std::vector<double> probs(const std::vector<double>& qkv) const {
    std::vector<double> P(static_cast<size_t>(c.B * c.H * c.T * c.T), 0.0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.H; ++h)
        for (int64_t t = 0; t < c.T; ++t) {
          std::vector<double> s(static_cast<size_t>(c.T), 0.0);
          double max = -1e300;
          for (int64_t j = 0; j < c.T; ++j) {
            if (!visible(t, j)) continue;
            double dot = 0;
            for (int64_t k = 0; k < c.D; ++k) {
              dot +=
                  qkv[at(b, t, h * c.D + k, 3 * C())] * qkv[at(b, j, C() + h * c.D + k, 3 * C())];
            }
            s[static_cast<size_t>(j)] = dot * scale;
            max = std::max(max, dot * scale);
          }
          double sum = 0;
          for (int64_t j = 0; j < c.T; ++j) {
            if (visible(t, j)) sum += std::exp(s[static_cast<size_t>(j)] - max);
          }
          for (int64_t j = 0; j < c.T; ++j) {
            if (visible(t, j)) P[sq(b, h, t, j)] = std::exp(s[static_cast<size_t>(j)] - max) / sum;
          }
        }
    return P;
  }

  // (B,H,T): log Σ_j e^(s_tj) over each row's visible positions.
  std::vector<double> logsumexp(const std::vector<double>& qkv) const {
    std::vector<double> lse(static_cast<size_t>(c.B * c.H * c.T), 0.0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.H; ++h)
        for (int64_t t = 0; t < c.T; ++t) {
          double sum = 0;
          for (int64_t j = 0; j < c.T; ++j) {
            if (!visible(t, j)) continue;
            double dot = 0;
            for (int64_t k = 0; k < c.D; ++k) {
              dot +=
                  qkv[at(b, t, h * c.D + k, 3 * C())] * qkv[at(b, j, C() + h * c.D + k, 3 * C())];
            }
            sum += std::exp(dot * scale);
          }
          lse[static_cast<size_t>((b * c.H + h) * c.T + t)] = std::log(sum);
        }
    return lse;
  }

  std::vector<double> forward(const std::vector<double>& qkv) const {
    std::vector<double> P = probs(qkv);
    std::vector<double> out(static_cast<size_t>(c.B * c.T * C()), 0.0);
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.H; ++h)
        for (int64_t t = 0; t < c.T; ++t)
          for (int64_t k = 0; k < c.D; ++k) {
            double acc = 0;
            for (int64_t j = 0; j < c.T; ++j) {
              acc += P[sq(b, h, t, j)] * drop(sq(b, h, t, j)) *
                     qkv[at(b, j, 2 * C() + h * c.D + k, 3 * C())];
            }
            out[at(b, t, h * c.D + k, C())] = acc;
          }
    return out;
  }

  std::vector<double> backward(const std::vector<double>& qkv,
                               const std::vector<double>& dout) const {
    std::vector<double> P = probs(qkv);
    std::vector<double> dqkv(qkv.size(), 0.0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
    const int64_t W = 3 * C();
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.H; ++h) {
        auto q = [&](int64_t t, int64_t k) { return at(b, t, h * c.D + k, W); };
        auto kk = [&](int64_t t, int64_t k) { return at(b, t, C() + h * c.D + k, W); };
        auto v = [&](int64_t t, int64_t k) { return at(b, t, 2 * C() + h * c.D + k, W); };
        auto o = [&](int64_t t, int64_t k) { return at(b, t, h * c.D + k, C()); };
        for (int64_t t = 0; t < c.T; ++t) {
          // dL/dP through dropout, then through the softmax.
          std::vector<double> dP(static_cast<size_t>(c.T), 0.0);
          for (int64_t j = 0; j < c.T; ++j) {
            double dw = 0;
            for (int64_t k = 0; k < c.D; ++k) dw += dout[o(t, k)] * qkv[v(j, k)];
            dP[static_cast<size_t>(j)] = dw * drop(sq(b, h, t, j));
            for (int64_t k = 0; k < c.D; ++k) {
              dqkv[v(j, k)] += P[sq(b, h, t, j)] * drop(sq(b, h, t, j)) * dout[o(t, k)];
            }
          }
          double dot = 0;
          for (int64_t j = 0; j < c.T; ++j) dot += P[sq(b, h, t, j)] * dP[static_cast<size_t>(j)];
          for (int64_t j = 0; j < c.T; ++j) {
            double ds = P[sq(b, h, t, j)] * (dP[static_cast<size_t>(j)] - dot) * scale;
            for (int64_t k = 0; k < c.D; ++k) {
              dqkv[q(t, k)] += ds * qkv[kk(j, k)];
              dqkv[kk(j, k)] += ds * qkv[q(t, k)];
            }
          }
        }
      }
    return dqkv;
  }
};

// Runs forward (and backward when dout is given) with fresh saved state.
struct Result {
  Tensor out, dqkv;
  AttentionSaved saved;
};

Result run_attention(const Tensor& qkv, const AttentionConfig& cfg, const Tensor* dout = nullptr) {
  Result r;
  AttentionWorkspace ws;
  const Shape& s = qkv.shape();
  r.out = Tensor::empty({s[0], s[1], s[2] / 3}, qkv.dtype());
  attention_forward(ec, qkv, cfg, r.out, r.saved, ws);
  if (dout) {
    r.dqkv = Tensor::empty(s, qkv.dtype());
    attention_backward(ec, *dout, qkv, r.saved, cfg, r.dqkv, ws);
  }
  return r;
}

// The kernels work in blocks of 64 query rows and 256 keys (backward: 256
// rows and 128 keys), and keep the probabilities up to 128 positions (the
// short path): lengths below, at and past each, and odd ones.
const Case kCases[] = {{1, 1, 1, 8},   {2, 1, 4, 16},  {2, 7, 4, 8},   {2, 5, 1, 16},
                       {1, 16, 4, 16}, {2, 33, 2, 8},  {1, 64, 1, 8},  {1, 65, 2, 8},
                       {1, 128, 2, 8}, {1, 129, 1, 8}, {1, 255, 1, 4}, {1, 257, 1, 8},
                       {2, 300, 1, 4}};

TEST(Attention, ForwardMatchesReference) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(::testing::Message()
                 << "B " << c.B << " T " << c.T << " H " << c.H << " D " << c.D);
    Tensor qkv = random_tensor(qkv_shape(c), 1, -2, 2);
    Result r = run_attention(qkv, {.heads = c.H});
    Reference ref{c};
    EXPECT_TRUE(close(ref.forward(doubles(qkv)), r.out.to_vector(), weft::testing::kF32));
    ASSERT_EQ(r.saved.lse.shape(), (Shape{c.B, c.H, c.T}));
    EXPECT_TRUE(close(ref.logsumexp(doubles(qkv)), r.saved.lse.to_vector(), weft::testing::kF32));
    // The saved output is the caller's tensor, not a copy.
    EXPECT_EQ(r.saved.out.raw(), r.out.raw());
  }
}

TEST(Attention, NonCausalMatchesReference) {
  for (const Case& c : {Case{2, 9, 2, 8}, Case{1, 300, 2, 4}}) {
    SCOPED_TRACE(::testing::Message() << "T " << c.T);
    Tensor qkv = random_tensor(qkv_shape(c), 2, -2, 2);
    Tensor dout = random_tensor(out_shape(c), 3);
    const AttentionConfig cfg{.heads = c.H, .causal = false};
    Result r = run_attention(qkv, cfg, &dout);
    Reference ref{c, false};
    EXPECT_TRUE(close(ref.forward(doubles(qkv)), r.out.to_vector(), weft::testing::kF32));
    EXPECT_TRUE(close(ref.logsumexp(doubles(qkv)), r.saved.lse.to_vector(), weft::testing::kF32));
    EXPECT_TRUE(close(ref.backward(doubles(qkv), doubles(dout)), r.dqkv.to_vector(),
                      weft::testing::kF32, 1e-2));
  }
}

TEST(Attention, BackwardMatchesReference) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(::testing::Message()
                 << "B " << c.B << " T " << c.T << " H " << c.H << " D " << c.D);
    Tensor qkv = random_tensor(qkv_shape(c), 4, -2, 2);
    Tensor dout = random_tensor(out_shape(c), 5);
    Result r = run_attention(qkv, {.heads = c.H}, &dout);
    // Gradients are sums of terms of size ~1e-2 that partly cancel; measure
    // the f32 error relative to that scale, not to the (sometimes tiny) result.
    EXPECT_TRUE(close(Reference{c}.backward(doubles(qkv), doubles(dout)), r.dqkv.to_vector(),
                      weft::testing::kF32, 1e-2));
  }
}

// f32 finite differences of a sum of O(1) terms carry errors near 1e-4.
constexpr weft::testing::Tolerance kFiniteDifference{2e-3, 2e-4};

TEST(Attention, BackwardMatchesFiniteDifferences) {
  // T = 67 spans two query blocks.
  for (const Case& c : {Case{2, 5, 2, 8}, Case{1, 67, 1, 2}}) {
    SCOPED_TRACE(::testing::Message() << "T " << c.T);
    Tensor qkv = random_tensor(qkv_shape(c), 6);
    Tensor w = random_tensor(out_shape(c), 7);
    const AttentionConfig cfg{.heads = c.H};
    AttentionSaved saved;
    AttentionWorkspace ws;
    Tensor out = Tensor::empty(out_shape(c));
    auto loss = [&] {
      attention_forward(ec, qkv, cfg, out, saved, ws);
      return weighted_sum(out, w);
    };
    std::vector<double> fd = finite_difference(qkv, loss);
    Result r = run_attention(qkv, cfg, &w);
    EXPECT_TRUE(close(fd, r.dqkv.to_vector(), kFiniteDifference));
  }
}

TEST(Attention, DropoutMatchesReferenceAndFiniteDifferences) {
  const Case c{2, 6, 2, 8};
  Tensor qkv = random_tensor(qkv_shape(c), 8);
  Tensor w = random_tensor(out_shape(c), 9);
  const AttentionConfig cfg{.heads = c.H, .dropout = 0.3f, .seed = 17, .offset = 5};
  Result r = run_attention(qkv, cfg, &w);

  // The mask is the documented stream: entry (b, h, t, j) uses number
  // offset + ((b·H + h)·T + t)·T + j and is kept when it is >= p.
  Tensor mask_tensor = attention_dropout_mask(ec, cfg, c.B, c.T);
  ASSERT_EQ(mask_tensor.shape(), (Shape{c.B, c.H, c.T, c.T}));
  std::vector<float> mask = mask_tensor.to_vector();
  int64_t dropped = 0;
  for (int64_t bh = 0; bh < c.B * c.H; ++bh)
    for (int64_t t = 0; t < c.T; ++t)
      for (int64_t j = 0; j < c.T; ++j) {
        uint64_t i = static_cast<uint64_t>((bh * c.T + t) * c.T + j);
        float expected = j <= t && uniform_at(cfg.seed, cfg.offset, i) >= cfg.dropout ? 1 : 0;
        ASSERT_EQ(mask[i], expected) << i;
        dropped += j <= t && expected == 0;
      }
  EXPECT_GT(dropped, 0);

  Reference ref{c, true, cfg.dropout, doubles(mask_tensor)};
  EXPECT_TRUE(close(ref.forward(doubles(qkv)), r.out.to_vector(), weft::testing::kF32));
  EXPECT_TRUE(
      close(ref.backward(doubles(qkv), doubles(w)), r.dqkv.to_vector(), weft::testing::kF32, 1e-2));

  // The mask depends on (seed, offset) only, so the loss is a smooth function
  // of qkv and finite differences see the same mask.
  AttentionSaved saved;
  AttentionWorkspace ws;
  Tensor out = Tensor::empty(out_shape(c));
  auto loss = [&] {
    attention_forward(ec, qkv, cfg, out, saved, ws);
    return weighted_sum(out, w);
  };
  EXPECT_TRUE(close(finite_difference(qkv, loss), r.dqkv.to_vector(), kFiniteDifference));
}

TEST(Attention, DropoutAcrossBlocksMatchesReference) {
  // Query and key blocks draw their numbers at the documented counters too.
  const Case c{1, 300, 2, 4};
  Tensor qkv = random_tensor(qkv_shape(c), 40, -2, 2);
  Tensor dout = random_tensor(out_shape(c), 41);
  for (bool causal : {true, false}) {
    SCOPED_TRACE(::testing::Message() << "causal " << causal);
    const AttentionConfig cfg{
        .heads = c.H, .dropout = 0.2f, .seed = 23, .offset = 1001, .causal = causal};
    Result r = run_attention(qkv, cfg, &dout);
    Reference ref{c, causal, cfg.dropout, doubles(attention_dropout_mask(ec, cfg, c.B, c.T))};
    EXPECT_TRUE(close(ref.forward(doubles(qkv)), r.out.to_vector(), weft::testing::kF32));
    EXPECT_TRUE(close(ref.backward(doubles(qkv), doubles(dout)), r.dqkv.to_vector(),
                      weft::testing::kF32, 1e-2));
  }
}

TEST(Attention, BlockPositionsMatchReference) {
  // A block of a longer sequence: the causal mask by true positions (the
  // queries `shift` positions past the keys), below, at and past the short
  // path and across key blocks.
  for (const Case& c : {Case{2, 7, 2, 8}, Case{1, 128, 2, 8}, Case{1, 300, 1, 4}}) {
    for (int64_t shift : {int64_t{0}, c.T / 2 + 1, c.T, 3 * c.T}) {
      SCOPED_TRACE(::testing::Message() << "T " << c.T << " shift " << shift);
      Tensor qkv = random_tensor(qkv_shape(c), 50, -2, 2);
      Tensor dout = random_tensor(out_shape(c), 51);
      const AttentionConfig cfg{
          .heads = c.H, .sequence = 5 * c.T, .query_position = c.T + shift, .key_position = c.T};
      Result r = run_attention(qkv, cfg, &dout);
      Reference ref{c};
      ref.shift = shift;
      EXPECT_TRUE(close(ref.forward(doubles(qkv)), r.out.to_vector(), weft::testing::kF32));
      EXPECT_TRUE(close(ref.logsumexp(doubles(qkv)), r.saved.lse.to_vector(), weft::testing::kF32));
      EXPECT_TRUE(close(ref.backward(doubles(qkv), doubles(dout)), r.dqkv.to_vector(),
                        weft::testing::kF32, 1e-2));
    }
  }
}

TEST(Attention, BlockDropoutIsTheWholeSequencesMask) {
  // A block draws the entries of the whole sequence's mask at its positions,
  // and computes with them.
  const Case c{2, 130, 2, 4};
  const int64_t S = 4 * c.T, qp = 2 * c.T + 3, kp = c.T;
  const AttentionConfig whole{.heads = c.H, .dropout = 0.25f, .seed = 9, .offset = 31};
  AttentionConfig block = whole;
  block.sequence = S;
  block.query_position = qp;
  block.key_position = kp;
  const std::vector<float> all = attention_dropout_mask(ec, whole, c.B, S).to_vector();
  const std::vector<float> part = attention_dropout_mask(ec, block, c.B, c.T).to_vector();
  for (int64_t bh = 0; bh < c.B * c.H; ++bh)
    for (int64_t t = 0; t < c.T; ++t)
      for (int64_t j = 0; j < c.T; ++j)
        ASSERT_EQ(part[static_cast<size_t>((bh * c.T + t) * c.T + j)],
                  all[static_cast<size_t>((bh * S + qp + t) * S + kp + j)])
            << bh << " " << t << " " << j;
  Tensor qkv = random_tensor(qkv_shape(c), 52, -2, 2);
  Tensor dout = random_tensor(out_shape(c), 53);
  Result r = run_attention(qkv, block, &dout);
  Reference ref{c, true, block.dropout, doubles(attention_dropout_mask(ec, block, c.B, c.T))};
  ref.shift = qp - kp;
  EXPECT_TRUE(close(ref.forward(doubles(qkv)), r.out.to_vector(), weft::testing::kF32));
  EXPECT_TRUE(close(ref.backward(doubles(qkv), doubles(dout)), r.dqkv.to_vector(),
                    weft::testing::kF32, 1e-2));
}

TEST(Attention, RefusesBlockPositionsOutsideTheSequence) {
  const Case c{1, 8, 1, 4};
  Tensor qkv = random_tensor(qkv_shape(c), 54);
  EXPECT_THROW(run_attention(qkv, {.heads = 1, .query_position = 2}), Error);
  EXPECT_THROW(
      run_attention(qkv, {.heads = 1, .sequence = 16, .query_position = 0, .key_position = 4}),
      Error);
  EXPECT_THROW(run_attention(qkv, {.heads = 1, .sequence = 12, .query_position = 8}), Error);
}

TEST(Attention, DropoutDependsOnSeedAndOffsetOnly) {
  ThreadsGuard guard;
  const Case c{2, 16, 2, 8};
  Tensor qkv = random_tensor(qkv_shape(c), 10);
  const AttentionConfig cfg{.heads = c.H, .dropout = 0.2f, .seed = 1, .offset = 0};
  set_num_threads(1);
  Result a = run_attention(qkv, cfg);
  set_num_threads(2);
  Result b = run_attention(qkv, cfg);
  EXPECT_TRUE(close(a.out, b.out, weft::testing::kF32));
  Result again = run_attention(qkv, cfg);
  EXPECT_EQ(again.out.to_vector(), b.out.to_vector());

  AttentionConfig other_seed = cfg;
  other_seed.seed = 2;
  Result d = run_attention(qkv, other_seed);
  EXPECT_NE(attention_dropout_mask(ec, cfg, c.B, c.T).to_vector(),
            attention_dropout_mask(ec, other_seed, c.B, c.T).to_vector());
  EXPECT_NE(a.out.to_vector(), d.out.to_vector());

  AttentionConfig other_offset = cfg;
  other_offset.offset = 1000;
  Result e = run_attention(qkv, other_offset);
  EXPECT_NE(a.out.to_vector(), e.out.to_vector());
  EXPECT_NE(attention_dropout_mask(ec, cfg, c.B, c.T).to_vector(),
            attention_dropout_mask(ec, other_offset, c.B, c.T).to_vector());
}

TEST(Attention, ZeroDropoutIsNoDropout) {
  const Case c{2, 8, 2, 8};
  Tensor qkv = random_tensor(qkv_shape(c), 11);
  Tensor dout = random_tensor(out_shape(c), 12);
  Result plain = run_attention(qkv, {.heads = c.H}, &dout);
  Result zero = run_attention(qkv, {.heads = c.H, .dropout = 0.0f, .seed = 99, .offset = 7}, &dout);
  EXPECT_EQ(plain.out.to_vector(), zero.out.to_vector());
  EXPECT_EQ(plain.dqkv.to_vector(), zero.dqkv.to_vector());
  EXPECT_FALSE(attention_dropout_mask(ec, {.heads = c.H, .seed = 99}, c.B, c.T).defined());
}

TEST(Attention, Causal) {
  // Changing tokens after t never changes the outputs at positions <= t.
  const Case c{2, 12, 2, 8};
  Tensor qkv = random_tensor(qkv_shape(c), 13);
  const AttentionConfig cfg{.heads = c.H, .dropout = 0.1f, .seed = 3};
  Result base = run_attention(qkv, cfg);
  const int64_t W = 3 * c.H * c.D, C = c.H * c.D;
  for (int64_t t : {0, 5, 10}) {
    Tensor changed = qkv.clone();
    float* p = changed.data<float>();
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t u = t + 1; u < c.T; ++u)
        for (int64_t k = 0; k < W; ++k) p[(b * c.T + u) * W + k] += 3.0f;
    Result r = run_attention(changed, cfg);
    std::vector<float> a = base.out.to_vector(), b = r.out.to_vector();
    for (int64_t bb = 0; bb < c.B; ++bb)
      for (int64_t u = 0; u <= t; ++u)
        for (int64_t k = 0; k < C; ++k) {
          size_t i = static_cast<size_t>((bb * c.T + u) * C + k);
          ASSERT_EQ(a[i], b[i]) << "b " << bb << " position " << u << " after changing > " << t;
        }
  }
}

TEST(Attention, Bf16MatchesF32) {
  for (const Case& c : {Case{2, 24, 4, 16}, Case{1, 300, 2, 16}}) {
    SCOPED_TRACE(::testing::Message() << "T " << c.T);
    Tensor qkv16 = random_tensor(qkv_shape(c), 14, -2, 2, DType::bf16);
    Tensor dout16 = random_tensor(out_shape(c), 15, -1, 1, DType::bf16);
    // The f32 run sees exactly the bf16 inputs, so only the bf16 arithmetic differs.
    Tensor qkv = qkv16.to(DType::f32), dout = dout16.to(DType::f32);
    for (float p : {0.0f, 0.25f}) {
      SCOPED_TRACE(::testing::Message() << "dropout " << p);
      const AttentionConfig cfg{.heads = c.H, .dropout = p, .seed = 21};
      Result r16 = run_attention(qkv16, cfg, &dout16);
      Result r32 = run_attention(qkv, cfg, &dout);
      EXPECT_EQ(r16.out.dtype(), DType::bf16);
      EXPECT_EQ(r16.saved.lse.dtype(), DType::f32);
      // bf16 rounds the probabilities and the softmax gradient (2^-9 relative),
      // so an element's error follows the size of the terms summed into it,
      // which the largest element bounds, not the element itself.
      EXPECT_TRUE(close(r32.out, r16.out, weft::testing::kBF16, max_abs(r32.out)));
      EXPECT_TRUE(close(r32.dqkv, r16.dqkv, weft::testing::kBF16, max_abs(r32.dqkv)));
    }
  }
}

// (A, B, W) -> (B, A, W) element by element (bf16 values survive the f32
// round trip exactly): batch-major activations to sequence-major and back.
Tensor swap01(const Tensor& t) {
  const int64_t A = t.size(0), B = t.size(1), W = t.size(2);
  std::vector<float> v = t.to_vector(), s(v.size());
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t w = 0; w < W; ++w) {
        s[static_cast<size_t>((b * A + a) * W + w)] = v[static_cast<size_t>((a * B + b) * W + w)];
      }
  return Tensor::from({B, A, W}, s, t.dtype());
}

TEST(Attention, SequenceMajorEqualsBatchMajorOnTransposedData) {
  for (const Case& c : {Case{3, 11, 2, 8}, Case{2, 64, 2, 32}, Case{2, 261, 1, 8}})
    for (DType dt : {DType::f32, DType::bf16})
      for (float p : {0.0f, 0.2f})
        for (bool causal : {true, false}) {
          SCOPED_TRACE(::testing::Message() << "T " << c.T << " " << dtype_name(dt) << " dropout "
                                            << p << " causal " << causal);
          Tensor qkv = random_tensor(qkv_shape(c), 30, -2, 2, dt);
          Tensor dout = random_tensor(out_shape(c), 31, -1, 1, dt);
          const AttentionConfig cfg{
              .heads = c.H, .dropout = p, .seed = 7, .offset = 3, .causal = causal};
          AttentionConfig seq = cfg;
          seq.sequence_major = true;
          Result batch_major = run_attention(qkv, cfg, &dout);
          Tensor qkv_t = swap01(qkv), dout_t = swap01(dout);
          Result sequence_major = run_attention(qkv_t, seq, &dout_t);
          ASSERT_EQ(sequence_major.out.shape(), (Shape{c.T, c.B, c.H * c.D}));
          // The same products on the same numbers, read through other strides.
          EXPECT_EQ(sequence_major.saved.lse.to_vector(), batch_major.saved.lse.to_vector());
          if (p > 0) {
            EXPECT_EQ(attention_dropout_mask(ec, seq, c.B, c.T).to_vector(),
                      attention_dropout_mask(ec, cfg, c.B, c.T).to_vector());
          }
          EXPECT_EQ(swap01(sequence_major.out).to_vector(), batch_major.out.to_vector());
          EXPECT_EQ(swap01(sequence_major.dqkv).to_vector(), batch_major.dqkv.to_vector());
        }
}

TEST(Attention, SequenceMajorChecksItsShapes) {
  AttentionSaved saved;
  AttentionWorkspace ws;
  const AttentionConfig seq{.heads = 2, .sequence_major = true};
  Tensor qkv = Tensor::zeros({4, 3, 24});  // T = 4, B = 3
  Tensor batch_major_out = Tensor::empty({3, 4, 8});
  EXPECT_THROW(attention_forward(ec, qkv, seq, batch_major_out, saved, ws), Error);
  Tensor out = Tensor::empty({4, 3, 8});
  attention_forward(ec, qkv, seq, out, saved, ws);
  EXPECT_EQ(saved.lse.shape(), (Shape{3, 2, 4}));
  Tensor dqkv = Tensor::empty({4, 3, 24});
  EXPECT_THROW(attention_backward(ec, batch_major_out, qkv, saved, seq, dqkv, ws), Error);
  EXPECT_NO_THROW(attention_backward(ec, out, qkv, saved, seq, dqkv, ws));
}

TEST(Attention, ReusesSavedStateAndWorkspace) {
  const Case c{2, 10, 2, 8};
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor qkv = random_tensor(qkv_shape(c), 16, -1, 1, dt);
    Tensor dout = random_tensor(out_shape(c), 17, -1, 1, dt);
    const AttentionConfig cfg{.heads = c.H, .dropout = 0.1f, .seed = 4};
    AttentionSaved saved;
    AttentionWorkspace ws;
    Tensor out = Tensor::empty(out_shape(c), dt), dqkv = Tensor::empty(qkv_shape(c), dt);
    attention_forward(ec, qkv, cfg, out, saved, ws);
    attention_backward(ec, dout, qkv, saved, cfg, dqkv, ws);
    std::vector<float> out1 = out.to_vector(), dqkv1 = dqkv.to_vector();
    const void* lse = saved.lse.raw();
    const void* buffer = ws.buffer.raw();
    attention_forward(ec, qkv, cfg, out, saved, ws);
    attention_backward(ec, dout, qkv, saved, cfg, dqkv, ws);
    EXPECT_EQ(saved.lse.raw(), lse);
    EXPECT_EQ(ws.buffer.raw(), buffer);
    EXPECT_EQ(out.to_vector(), out1);
    EXPECT_EQ(dqkv.to_vector(), dqkv1);
  }
}

TEST(Attention, ConcurrentCallers) {
  // Ranks of the local backend call kernels from their own threads at once.
  const Case c{2, 20, 2, 8};
  const AttentionConfig cfg{.heads = c.H, .dropout = 0.1f, .seed = 5};
  Tensor qkv = random_tensor(qkv_shape(c), 18);
  Tensor dout = random_tensor(out_shape(c), 19);
  Result expected = run_attention(qkv, cfg, &dout);
  std::vector<Result> runs(4);
  std::vector<std::thread> threads;
  for (Result& r : runs) {
    threads.emplace_back([&] {
      set_num_threads(1);
      for (int i = 0; i < 3; ++i) r = run_attention(qkv, cfg, &dout);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const Result& r : runs) {
    EXPECT_TRUE(close(expected.out, r.out, weft::testing::kF32));
    EXPECT_TRUE(close(expected.dqkv, r.dqkv, weft::testing::kF32));
  }
}

TEST(Attention, NeverHoldsTheFullProbabilities) {
  // Everything the kernels keep besides the activations (the saved row
  // logsumexps and the workspace) is far below one f32 T x T matrix per head.
  const Case c{1, 2048, 2, 16};
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor qkv = random_tensor(qkv_shape(c), 50, -1, 1, dt);
    Tensor dout = random_tensor(out_shape(c), 51, -1, 1, dt);
    AttentionSaved saved;
    AttentionWorkspace ws;
    Tensor out = Tensor::empty(out_shape(c), dt), dqkv = Tensor::empty(qkv_shape(c), dt);
    attention_forward(ec, qkv, {.heads = c.H, .dropout = 0.1f, .seed = 1}, out, saved, ws);
    attention_backward(ec, dout, qkv, saved, {.heads = c.H, .dropout = 0.1f, .seed = 1}, dqkv, ws);
    const int64_t square = c.B * c.H * c.T * c.T * 4;
    EXPECT_FALSE(saved.probs.defined());
    EXPECT_LT(saved.lse.nbytes() + ws.buffer.nbytes(), square / 8) << dtype_name(dt);
  }
}

TEST(Attention, ShortSequencesKeepTheProbabilities) {
  // Up to 128 positions the forward keeps P (0 where masked, rows summing to
  // 1) for backward; past that, nothing of T x T.
  for (const Case& c : {Case{2, 128, 2, 8}, Case{1, 129, 1, 8}}) {
    Tensor qkv = random_tensor(qkv_shape(c), 52, -2, 2);
    Result r = run_attention(qkv, {.heads = c.H});
    if (c.T > 128) {
      EXPECT_FALSE(r.saved.probs.defined());
      continue;
    }
    ASSERT_EQ(r.saved.probs.shape(), (Shape{c.B, c.H, c.T, c.T}));
    const std::vector<float> p = r.saved.probs.to_vector();
    for (int64_t row = 0; row < c.B * c.H * c.T; ++row) {
      const float* pr = p.data() + row * c.T;
      EXPECT_NEAR(std::accumulate(pr, pr + c.T, 0.0), 1.0, 1e-5) << "row " << row;
      EXPECT_TRUE(std::all_of(pr + row % c.T + 1, pr + c.T, [](float v) { return v == 0.0f; }));
    }
    AttentionSaved lost = r.saved;  // backward needs them
    lost.probs = Tensor();
    Tensor dout = random_tensor(out_shape(c), 53), dqkv = Tensor::empty(qkv_shape(c));
    const std::string e = weft::testing::error_of([&] {
      AttentionWorkspace ws;
      attention_backward(ec, dout, qkv, lost, {.heads = c.H}, dqkv, ws);
    });
    EXPECT_NE(e.find("needs the probabilities"), std::string::npos) << e;
  }
}

TEST(Attention, RejectsBadShapes) {
  AttentionSaved saved;
  AttentionWorkspace ws;
  // 3C = 30 is not divisible into 3 parts of 4 heads.
  Tensor qkv = Tensor::zeros({1, 4, 30});
  Tensor out = Tensor::empty({1, 4, 10});
  EXPECT_THROW(attention_forward(ec, qkv, {.heads = 4}, out, saved, ws), Error);
  // Not a multiple of 3.
  Tensor ragged = Tensor::zeros({1, 4, 31});
  EXPECT_THROW(attention_forward(ec, ragged, {.heads = 1}, out, saved, ws), Error);
  Tensor flat = Tensor::zeros({4, 24});
  EXPECT_THROW(attention_forward(ec, flat, {.heads = 2}, out, saved, ws), Error);

  Tensor good = Tensor::zeros({1, 4, 24});
  Tensor out8 = Tensor::empty({1, 4, 8});
  EXPECT_THROW(attention_forward(ec, good, {.heads = 0}, out8, saved, ws), Error);
  EXPECT_THROW(attention_forward(ec, good, {.heads = 2, .dropout = 1.0f}, out8, saved, ws), Error);
  EXPECT_THROW(attention_forward(ec, good, {.heads = 2}, out, saved, ws), Error);
  Tensor out_bf16 = Tensor::empty({1, 4, 8}, DType::bf16);
  EXPECT_THROW(attention_forward(ec, good, {.heads = 2}, out_bf16, saved, ws), Error);

  attention_forward(ec, good, {.heads = 2}, out8, saved, ws);
  Tensor dqkv = Tensor::empty({1, 4, 24});
  Tensor dout = Tensor::zeros({1, 4, 8});
  Tensor wrong_dout = Tensor::zeros({1, 3, 8});
  EXPECT_THROW(attention_backward(ec, wrong_dout, good, saved, {.heads = 2}, dqkv, ws), Error);
  Tensor wrong_dqkv = Tensor::empty({1, 4, 21});
  EXPECT_THROW(attention_backward(ec, dout, good, saved, {.heads = 2}, wrong_dqkv, ws), Error);
  // Nor from another head count.
  EXPECT_THROW(attention_backward(ec, dout, good, saved, {.heads = 4}, dqkv, ws), Error);
  AttentionSaved empty;
  EXPECT_THROW(attention_backward(ec, dout, good, empty, {.heads = 2}, dqkv, ws), Error);
  EXPECT_NO_THROW(attention_backward(ec, dout, good, saved, {.heads = 2}, dqkv, ws));
}

}  // namespace
}  // namespace weft::kernels
