// Generation's attention (kv_cache_write, attention_decode) against a naive
// fp64 causal attention over the whole sequences: entries of a batch at
// different lengths, several new rows per call and one, grouped-query heads,
// f32 and bf16; positions past an entry's length hold NaN in the caches, so
// a read beyond them shows.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "testing.h"
#include "weft/kernels/attention.h"

namespace weft::kernels {
namespace {

const ExecContext& ec = ExecContext::host();

struct Case {
  int64_t B, T, H, Hkv, D;
};

int64_t width(const Case& c) { return (c.H + 2 * c.Hkv) * c.D; }

// out (B, T, H·D) of causal attention over x (B, T, W), in fp64.
std::vector<double> reference(const Case& c, const std::vector<float>& x) {
  const int64_t W = width(c), C = c.H * c.D;
  std::vector<double> out(static_cast<size_t>(c.B * c.T * C), 0.0);
  auto at = [&](int64_t b, int64_t t, int64_t col) {
    return static_cast<double>(x[static_cast<size_t>((b * c.T + t) * W + col)]);
  };
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h) {
      const int64_t kc = (c.H + h % c.Hkv) * c.D, vc = (c.H + c.Hkv + h % c.Hkv) * c.D;
      for (int64_t t = 0; t < c.T; ++t) {
        std::vector<double> p(static_cast<size_t>(t + 1));
        double max = -1e300, sum = 0;
        for (int64_t j = 0; j <= t; ++j) {
          double dot = 0;
          for (int64_t k = 0; k < c.D; ++k) dot += at(b, t, h * c.D + k) * at(b, j, kc + k);
          p[static_cast<size_t>(j)] = dot * scale;
          max = std::max(max, dot * scale);
        }
        for (double& v : p) sum += v = std::exp(v - max);
        for (int64_t k = 0; k < c.D; ++k) {
          double acc = 0;
          for (int64_t j = 0; j <= t; ++j) acc += p[static_cast<size_t>(j)] * at(b, j, vc + k);
          out[static_cast<size_t>((b * c.T + t) * C + h * c.D + k)] = acc / sum;
        }
      }
    }
  return out;
}

// Rows [first[b], first[b] + S) of each entry of x (B, T, W) as a (B, S, W) tensor.
Tensor rows_from(const Case& c, const std::vector<float>& x, const std::vector<int64_t>& first,
                 int64_t S, DType dt) {
  const int64_t W = width(c);
  std::vector<float> v;
  for (int64_t b = 0; b < c.B; ++b) {
    const auto row0 = x.begin() + (b * c.T + first[static_cast<size_t>(b)]) * W;
    v.insert(v.end(), row0, row0 + S * W);
  }
  return Tensor::from({c.B, S, W}, v, dt);
}

struct DecodeCase {
  Case c;
  DType dt;
};

class AttentionDecode : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(AttentionDecode, PrefixesThenNewRowsMatchFullCausalAttention) {
  const Case c = GetParam().c;
  const DType dt = GetParam().dt;
  const int64_t W = width(c), C = c.H * c.D, L = c.T + 3;
  // bf16 inputs are rounded once, so the reference sees the same numbers.
  const std::vector<float> x =
      testing::random_tensor({c.B, c.T, W}, 17, -1.0f, 1.0f).to(dt).to(DType::f32).to_vector();
  const std::vector<double> want = reference(c, x);
  const AttentionConfig cfg{.heads = c.H, .kv_heads = c.Hkv};
  Tensor kc = Tensor::full({c.B, c.Hkv, L, c.D}, std::numeric_limits<float>::quiet_NaN(), dt);
  Tensor vc = Tensor::full({c.B, c.Hkv, L, c.D}, std::numeric_limits<float>::quiet_NaN(), dt);
  AttentionWorkspace ws;
  // Entry b's prompt: the first len[b] positions, written one entry at a time
  // (views of its cache rows), then attended in one call per entry.
  std::vector<int64_t> len(static_cast<size_t>(c.B));
  for (int64_t b = 0; b < c.B; ++b) len[static_cast<size_t>(b)] = 1 + (2 * b + 1) % (c.T - 3);
  for (int64_t b = 0; b < c.B; ++b) {
    const int64_t n = len[static_cast<size_t>(b)];
    const Case one{1, c.T, c.H, c.Hkv, c.D};
    std::vector<float> xb(x.begin() + b * c.T * W, x.begin() + (b + 1) * c.T * W);
    const Tensor q = rows_from(one, xb, {0}, n, dt);
    Tensor kb = kc.narrow(b, 1), vb = vc.narrow(b, 1), out = Tensor::empty({1, n, C}, dt);
    const std::vector<int64_t> zero{0};
    kv_cache_write(ec, q, zero, cfg, kb, vb);
    attention_decode(ec, q, zero, cfg, kb, vb, out, ws);
    std::vector<double> e;
    for (int64_t t = 0; t < n; ++t) {
      const auto r = want.begin() + (b * c.T + t) * C;
      e.insert(e.end(), r, r + C);
    }
    EXPECT_TRUE(testing::close(e, out.to(DType::f32).to_vector(),
                               dt == DType::f32 ? testing::kF32 : testing::kBF16))
        << "prompt of entry " << b;
  }
  // Then two new rows per entry, then one, each entry at its own position.
  for (int64_t S : {2, 1}) {
    const Tensor q = rows_from(c, x, len, S, dt);
    Tensor out = Tensor::empty({c.B, S, C}, dt);
    kv_cache_write(ec, q, len, cfg, kc, vc);
    attention_decode(ec, q, len, cfg, kc, vc, out, ws);
    std::vector<double> e;
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t s = 0; s < S; ++s) {
        const auto r = want.begin() + (b * c.T + len[static_cast<size_t>(b)] + s) * C;
        e.insert(e.end(), r, r + C);
      }
    EXPECT_TRUE(testing::close(e, out.to(DType::f32).to_vector(),
                               dt == DType::f32 ? testing::kF32 : testing::kBF16))
        << S << " new rows";
    for (int64_t& n : len) n += S;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionDecode,
                         ::testing::Values(DecodeCase{{3, 9, 4, 4, 8}, DType::f32},  // multi-head
                                           DecodeCase{{2, 11, 6, 2, 16},
                                                      DType::f32},  // grouped-query
                                           DecodeCase{{3, 9, 4, 1, 8}, DType::f32},  // multi-query
                                           DecodeCase{{2, 11, 6, 2, 16}, DType::bf16}),
                         [](const auto& p) {
                           const Case& c = p.param.c;
                           return std::string(dtype_name(p.param.dt)) + "_H" + std::to_string(c.H) +
                                  "_Hkv" + std::to_string(c.Hkv);
                         });

TEST(AttentionDecodeChecks, NamePositionsOutsideTheCache) {
  const Case c{2, 4, 2, 2, 4};
  const Tensor q = Tensor::zeros({2, 1, width(c)});
  Tensor kc = Tensor::zeros({2, 2, 4, 4}), vc = Tensor::zeros({2, 2, 4, 4});
  const AttentionConfig cfg{.heads = 2};
  const std::vector<int64_t> start{0, 4};
  const std::string e = testing::error_of([&] { kv_cache_write(ec, q, start, cfg, kc, vc); });
  EXPECT_NE(e.find("batch entry 1's new positions [4, 5) do not fit the cache's 4 positions"),
            std::string::npos)
      << e;
  const std::vector<int64_t> one{0};
  const std::string n = testing::error_of([&] { kv_cache_write(ec, q, one, cfg, kc, vc); });
  EXPECT_NE(n.find("1 start positions for a batch of 2"), std::string::npos) << n;
}

}  // namespace
}  // namespace weft::kernels
