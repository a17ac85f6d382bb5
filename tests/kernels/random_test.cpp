#include "weft/kernels/random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "testing.h"
#include "weft/core/threads.h"

namespace weft::kernels {
namespace {

// The host context: the calling thread's CPU threads.
const ExecContext& ec = ExecContext::host();

using weft::testing::random_tensor;

// Restores the default thread count when a test ends, whatever it set.
struct ThreadsGuard {
  ~ThreadsGuard() { set_num_threads(0); }
};

struct Kat {
  std::array<uint32_t, 4> ctr;
  std::array<uint32_t, 2> key;
  std::array<uint32_t, 4> expected;
};

// Random123's kat_vectors, the "philox4x32 10" lines (counter, key, result).
TEST(Random, PhiloxKnownAnswers) {
  const Kat kats[] = {
      {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
       {0x00000000, 0x00000000},
       {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    EXPECT_EQ(philox4x32_10(k.ctr, k.key), k.expected);
  }
}

TEST(Random, StreamElementsAreWordsOfBlocks) {
  const uint64_t seed = 0x0123456789abcdefull;
  for (uint64_t block : {0ull, 1ull, 0x1'0000'0001ull}) {
    std::array<uint32_t, 4> words =
        philox4x32_10({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0, 0},
                      {0x89abcdefu, 0x01234567u});
    for (uint64_t w = 0; w < 4; ++w) {
      EXPECT_EQ(uniform_at(seed, 0, 4 * block + w), bits_to_uniform(words[w]));
      EXPECT_EQ(uniform_at(seed, 4 * block, w), bits_to_uniform(words[w]));
    }
  }
}

TEST(Random, UniformRangeAndMoments) {
  Tensor u = Tensor::empty({100000});
  fill_uniform(ec, 7, 0, u);
  double sum = 0, sum_sq = 0;
  for (float v : u.to_vector()) {
    ASSERT_GE(v, 0.0f);
    ASSERT_LT(v, 1.0f);
    sum += v;
    sum_sq += static_cast<double>(v) * v;
  }
  double n = static_cast<double>(u.numel());
  // Mean 1/2 and variance 1/12; five standard errors.
  EXPECT_NEAR(sum / n, 0.5, 5 * std::sqrt(1.0 / 12 / n));
  EXPECT_NEAR(sum_sq / n - (sum / n) * (sum / n), 1.0 / 12, 1e-3);
  EXPECT_EQ(bits_to_uniform(0xffffffffu), 1.0f - 0x1p-24f);
  EXPECT_EQ(bits_to_uniform(0u), 0.0f);
}

TEST(Random, FillMatchesUniformAtForAnySplit) {
  ThreadsGuard guard;
  const int64_t n = 50001;  // several parallel chunks and a ragged end
  for (uint64_t offset : {0ull, 3ull, 1ull << 40}) {
    set_num_threads(1);
    Tensor one = Tensor::empty({n});
    fill_uniform(ec, 42, offset, one);
    set_num_threads(2);
    Tensor two = Tensor::empty({n});
    fill_uniform(ec, 42, offset, two);
    std::vector<float> a = one.to_vector(), b = two.to_vector();
    ASSERT_EQ(a, b);
    for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{16383}, int64_t{16384}, n - 1}) {
      EXPECT_EQ(a[static_cast<size_t>(i)], uniform_at(42, offset, static_cast<uint64_t>(i)));
    }
  }
}

TEST(Random, OffsetShiftsTheStream) {
  const int64_t n = 1000;
  Tensor base = Tensor::empty({n + 8});
  fill_uniform(ec, 99, 0, base);
  std::vector<float> all = base.to_vector();
  for (int64_t k : {1, 2, 3, 4, 5, 8}) {
    Tensor shifted = Tensor::empty({n});
    fill_uniform(ec, 99, static_cast<uint64_t>(k), shifted);
    EXPECT_EQ(shifted.to_vector(), std::vector<float>(all.begin() + k, all.begin() + k + n))
        << "offset " << k;
  }
  // Different seeds give different streams.
  Tensor other = Tensor::empty({n + 8});
  fill_uniform(ec, 100, 0, other);
  EXPECT_NE(other.to_vector(), all);
}

TEST(Dropout, SameAcrossThreadCounts) {
  ThreadsGuard guard;
  Tensor x = random_tensor({7, 10007}, 1);
  auto run = [&](int threads) {
    set_num_threads(threads);
    Tensor y = Tensor::empty(x.shape()), mask = Tensor::empty(x.shape(), DType::u8);
    dropout_forward(ec, x, 0.3f, 1234, 77, y, mask);
    return std::make_pair(y.to_vector(), mask.to_vector());
  };
  auto [y1, m1] = run(1);
  auto [y2, m2] = run(2);
  EXPECT_EQ(y1, y2);
  EXPECT_EQ(m1, m2);
}

TEST(Dropout, ForwardKeepsAndScales) {
  const float p = 0.25f;
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor x = random_tensor({300, 41}, 2, -1, 1, dt);
    Tensor y = Tensor::empty(x.shape(), dt), mask = Tensor::empty(x.shape(), DType::u8);
    dropout_forward(ec, x, p, 5, 11, y, mask);
    std::vector<float> xs = x.to_vector(), ys = y.to_vector(), ms = mask.to_vector();
    for (size_t i = 0; i < xs.size(); ++i) {
      bool keep = uniform_at(5, 11, i) >= p;
      ASSERT_EQ(ms[i], keep ? 1.0f : 0.0f) << i;
      float expected = keep ? xs[i] * (1.0f / (1 - p)) : 0.0f;
      if (dt == DType::bf16) expected = round_to_bf16(expected);
      ASSERT_EQ(ys[i], expected) << i;
    }
  }
}

TEST(Dropout, KeepRateWithinStatisticalBounds) {
  const int64_t n = 1 << 20;
  Tensor x = Tensor::full({n}, 1.0f);
  for (float p : {0.1f, 0.5f, 0.9f}) {
    Tensor y = Tensor::empty({n}), mask = Tensor::empty({n}, DType::u8);
    dropout_forward(ec, x, p, 2024, 0, y, mask);
    double kept = 0, total = 0;
    for (float v : mask.to_vector()) kept += v;
    for (float v : y.to_vector()) total += v;
    double sigma = std::sqrt(p * (1.0 - p) / static_cast<double>(n));
    EXPECT_NEAR(kept / n, 1.0 - p, 5 * sigma) << "p " << p;
    // Inverted dropout keeps the expectation: the mean of y estimates 1.
    EXPECT_NEAR(total / n, 1.0, 5 * sigma / (1.0 - p)) << "p " << p;
  }
}

TEST(Dropout, OffsetShiftsTheMask) {
  const int64_t n = 4096;
  Tensor x = Tensor::full({n + 8}, 1.0f);
  Tensor y = Tensor::empty({n + 8}), full_mask = Tensor::empty({n + 8}, DType::u8);
  dropout_forward(ec, x, 0.5f, 3, 0, y, full_mask);
  std::vector<float> all = full_mask.to_vector();
  for (int64_t k : {1, 3, 4, 7}) {
    Tensor xs = Tensor::full({n}, 1.0f), ys = Tensor::empty({n});
    Tensor mask = Tensor::empty({n}, DType::u8);
    dropout_forward(ec, xs, 0.5f, 3, static_cast<uint64_t>(k), ys, mask);
    EXPECT_EQ(mask.to_vector(), std::vector<float>(all.begin() + k, all.begin() + k + n))
        << "offset " << k;
  }
}

TEST(Dropout, SeedsDiffer) {
  Tensor x = Tensor::full({1000}, 1.0f);
  Tensor y = Tensor::empty({1000}), a = Tensor::empty({1000}, DType::u8),
         b = Tensor::empty({1000}, DType::u8);
  dropout_forward(ec, x, 0.5f, 1, 0, y, a);
  dropout_forward(ec, x, 0.5f, 2, 0, y, b);
  EXPECT_NE(a.to_vector(), b.to_vector());
}

TEST(Dropout, ZeroProbabilityIsIdentity) {
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor x = random_tensor({33, 17}, 4, -1, 1, dt);
    Tensor y = Tensor::empty(x.shape(), dt), mask = Tensor::empty(x.shape(), DType::u8);
    dropout_forward(ec, x, 0.0f, 9, 0, y, mask);
    EXPECT_EQ(y.to_vector(), x.to_vector());
    EXPECT_EQ(mask.to_vector(), std::vector<float>(static_cast<size_t>(x.numel()), 1.0f));
  }
}

TEST(Dropout, BackwardIsMaskedScaledGradient) {
  const float p = 0.4f;
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor x = random_tensor({129, 65}, 5, -1, 1, dt);
    Tensor y = Tensor::empty(x.shape(), dt), mask = Tensor::empty(x.shape(), DType::u8);
    dropout_forward(ec, x, p, 8, 123, y, mask);
    Tensor dy = random_tensor(x.shape(), 6, -1, 1, dt);
    Tensor dx = Tensor::empty(x.shape(), dt);
    dropout_backward(ec, dy, mask, p, dx);
    std::vector<float> g = dy.to_vector(), m = mask.to_vector(), got = dx.to_vector();
    for (size_t i = 0; i < g.size(); ++i) {
      float expected = m[i] != 0 ? g[i] * (1.0f / (1 - p)) : 0.0f;
      if (dt == DType::bf16) expected = round_to_bf16(expected);
      ASSERT_EQ(got[i], expected) << i;
    }
  }
}

TEST(Dropout, BackwardMatchesFiniteDifferences) {
  // With the mask fixed by (seed, offset), y is linear in x; its derivative
  // is the backward pass.
  const float p = 0.3f;
  Tensor x = random_tensor({6, 7}, 10);
  Tensor w = random_tensor(x.shape(), 11);
  Tensor y = Tensor::empty(x.shape()), mask = Tensor::empty(x.shape(), DType::u8);
  auto loss = [&] {
    dropout_forward(ec, x, p, 77, 5, y, mask);
    return weft::testing::weighted_sum(y, w);
  };
  std::vector<double> fd = weft::testing::finite_difference(x, loss);
  loss();
  Tensor dx = Tensor::empty(x.shape());
  dropout_backward(ec, w, mask, p, dx);
  EXPECT_TRUE(weft::testing::close(fd, dx.to_vector(), {1e-3, 1e-4}));
}

TEST(Dropout, RejectsBadArguments) {
  Tensor x = Tensor::full({10}, 1.0f);
  Tensor y = Tensor::empty({10}), mask = Tensor::empty({10}, DType::u8);
  EXPECT_THROW(dropout_forward(ec, x, 1.0f, 0, 0, y, mask), Error);
  EXPECT_THROW(dropout_forward(ec, x, -0.1f, 0, 0, y, mask), Error);
  EXPECT_THROW(dropout_forward(ec, x, std::nanf(""), 0, 0, y, mask), Error);
  EXPECT_THROW(dropout_backward(ec, y, mask, 1.5f, x), Error);
  Tensor wrong_mask = Tensor::empty({10});
  EXPECT_THROW(dropout_forward(ec, x, 0.1f, 0, 0, y, wrong_mask), Error);
  Tensor short_y = Tensor::empty({9});
  EXPECT_THROW(dropout_forward(ec, x, 0.1f, 0, 0, short_y, mask), Error);
  Tensor bf16_y = Tensor::empty({10}, DType::bf16);
  EXPECT_THROW(dropout_forward(ec, x, 0.1f, 0, 0, bf16_y, mask), Error);
  EXPECT_THROW(dropout_backward(ec, x, mask, 0.1f, short_y), Error);
}

}  // namespace
}  // namespace weft::kernels
