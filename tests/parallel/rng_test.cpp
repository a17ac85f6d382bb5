// RngTracker streams, forks and state; TP-invariant initialization.
#include "weft/parallel/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "contexts.h"
#include "weft/comm/grid.h"
#include "weft/comm/local.h"
#include "weft/kernels/random.h"
#include "weft/nn/embedding.h"
#include "weft/nn/linear.h"
#include "weft/parallel/mappings.h"

namespace weft::parallel {
namespace {

using Stream = RngTracker::Stream;

TEST(RngTracker, SeedsFollowMegatron) {
  RngTracker rng(42, 3);
  RngTracker::State s = rng.state();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s.at(kDefaultStream), (Stream{42, 0}));
  EXPECT_EQ(s.at(kModelParallelStream), (Stream{42 + 2718 + 3, 0}));
  EXPECT_EQ(rng.current(), kDefaultStream);
  EXPECT_EQ(RngTracker(42, 0).state().at(kModelParallelStream).seed, 2760u);
}

TEST(RngTracker, TakeAdvancesTheCurrentStream) {
  RngTracker rng(7, 1);
  EXPECT_EQ(rng.take(10), (Stream{7, 0}));
  EXPECT_EQ(rng.take(5), (Stream{7, 10}));
  EXPECT_EQ(rng.take(0), (Stream{7, 15}));
  EXPECT_EQ(rng.state().at(kDefaultStream).offset, 15u);
  EXPECT_EQ(rng.state().at(kModelParallelStream).offset, 0u);
}

TEST(RngTracker, ForkRestoresThePreviousStream) {
  RngTracker rng(7, 1);
  rng.add("data", 99);
  {
    auto mp = rng.fork();
    EXPECT_EQ(rng.current(), kModelParallelStream);
    EXPECT_EQ(rng.take(4), (Stream{7 + 2718 + 1, 0}));
    {
      auto data = rng.fork("data");
      EXPECT_EQ(rng.current(), "data");
      EXPECT_EQ(rng.take(3), (Stream{99, 0}));
    }
    EXPECT_EQ(rng.current(), kModelParallelStream);
    EXPECT_EQ(rng.take(1), (Stream{7 + 2718 + 1, 4}));
  }
  EXPECT_EQ(rng.current(), kDefaultStream);
  EXPECT_EQ(rng.take(2), (Stream{7, 0}));  // the default stream was not touched
}

TEST(RngTracker, ForkRestoresOnException) {
  RngTracker rng(7, 0);
  try {
    auto mp = rng.fork();
    rng.take(8);
    throw std::runtime_error("dropout failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(rng.current(), kDefaultStream);
  EXPECT_EQ(rng.state().at(kModelParallelStream).offset, 8u);
}

TEST(RngTracker, Errors) {
  RngTracker rng(7, 0);
  EXPECT_THROW(rng.add(kDefaultStream, 1), Error);
  EXPECT_THROW((void)rng.fork("nope"), Error);
  EXPECT_EQ(rng.current(), kDefaultStream);  // a failed fork changes nothing
  RngTracker empty;
  EXPECT_THROW(empty.take(1), Error);
  RngTracker other(7, 0);
  other.add("extra", 5);
  EXPECT_THROW(rng.set_state(other.state()), Error);  // different streams
  RngTracker::State renamed = rng.state();
  renamed["other"] = renamed.at(kDefaultStream);
  renamed.erase(kDefaultStream);
  EXPECT_THROW(rng.set_state(renamed), Error);
}

TEST(RngTracker, StateRoundTrips) {
  RngTracker rng(11, 2);
  rng.take(100);
  {
    auto mp = rng.fork();
    rng.take(33);
  }
  const RngTracker::State saved = rng.state();
  const Stream next_default = rng.take(6);
  Stream next_mp;
  {
    auto mp = rng.fork();
    next_mp = rng.take(6);
  }
  EXPECT_NE(rng.state(), saved);

  // Restoring into a fresh tracker (a resumed run) gives the same numbers.
  RngTracker resumed(11, 2);
  resumed.set_state(saved);
  EXPECT_EQ(resumed.state(), saved);
  EXPECT_EQ(resumed.take(6), next_default);
  auto mp = resumed.fork();
  EXPECT_EQ(resumed.take(6), next_mp);
}

// Dropout masks: the default stream agrees across TP ranks, the
// model-parallel stream differs per rank.
TEST(RngTracker, StreamsAgreeOrDifferAcrossTpRanks) {
  const int n = 4;
  std::vector<std::vector<float>> by_default(n), by_mp(n);
  comm::run_local(n, [&](comm::ProcessGroup& world) {
    RngTracker rng(1234, world.rank());
    auto draw = [&] {
      Tensor x = Tensor::full({256}, 1.0f), y = Tensor::empty({256});
      Tensor mask = Tensor::empty({256}, DType::u8);
      Stream s = rng.take(256);
      kernels::dropout_forward(ExecContext::host(), x, 0.5f, s.seed, s.offset, y, mask);
      return y.to_vector();
    };
    by_default[static_cast<size_t>(world.rank())] = draw();
    auto mp = rng.fork();
    by_mp[static_cast<size_t>(world.rank())] = draw();
  });
  for (int r = 1; r < n; ++r) {
    EXPECT_EQ(by_default[static_cast<size_t>(r)], by_default[0]) << "rank " << r;
    for (int q = 0; q < r; ++q) {
      EXPECT_NE(by_mp[static_cast<size_t>(r)], by_mp[static_cast<size_t>(q)])
          << "ranks " << q << ", " << r;
    }
  }
}

TEST(NormalInit, DependsOnSeedAndNameOnly) {
  Tensor a = normal_init({33, 7}, 5, "h.0.mlp.fc.weight", 0.02f);  // odd element count
  Tensor b = normal_init({33, 7}, 5, "h.0.mlp.fc.weight", 0.02f);
  EXPECT_EQ(a.to_vector(), b.to_vector());
  EXPECT_NE(a.to_vector(), normal_init({33, 7}, 5, "h.1.mlp.fc.weight", 0.02f).to_vector());
  EXPECT_NE(a.to_vector(), normal_init({33, 7}, 6, "h.0.mlp.fc.weight", 0.02f).to_vector());
  // The element order is the flat index: another shape of the same size holds
  // the same numbers.
  EXPECT_EQ(a.to_vector(), normal_init({231}, 5, "h.0.mlp.fc.weight", 0.02f).to_vector());
  // The standard deviation scales the values exactly.
  std::vector<float> unit = normal_init({33, 7}, 5, "h.0.mlp.fc.weight", 1.0f).to_vector();
  std::vector<float> scaled = normal_init({33, 7}, 5, "h.0.mlp.fc.weight", 0.5f).to_vector();
  for (size_t i = 0; i < unit.size(); ++i) ASSERT_FLOAT_EQ(scaled[i], 0.5f * unit[i]);
}

TEST(NormalInit, IsNormalWithTheGivenStd) {
  const int64_t n = 1 << 18;
  std::vector<float> v = normal_init({n}, 9, "wte.weight", 0.02f).to_vector();
  double sum = 0, sq = 0, within = 0;
  for (float x : v) {
    sum += x;
    sq += double(x) * x;
    within += std::abs(x) < 0.02f;
  }
  const double mean = sum / n, std = std::sqrt(sq / n - mean * mean);
  // Standard errors: 0.02/sqrt(n) ≈ 4e-5 for the mean, 0.02/sqrt(2n) ≈ 2.8e-5 for the std.
  EXPECT_LT(std::abs(mean), 2e-4);
  EXPECT_NEAR(std, 0.02, 2e-4);
  EXPECT_NEAR(within / n, 0.6827, 0.005);  // one sigma
}

// Shards at TP 2 and 4 are bit-identical to slices of the TP=1 weights.
class TpInvariantInit : public ::testing::TestWithParam<int> {};

TEST_P(TpInvariantInit, ShardsAreSlicesOfTheTp1Tensor) {
  const int tp = GetParam();
  nn::Linear col1(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 3),
                  {.name = "c", .in = 8, .out = 12, .mode = nn::Parallel::column});
  nn::Linear row1(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 3),
                  {.name = "r", .in = 8, .out = 12, .mode = nn::Parallel::row});
  nn::Linear qkv1(
      ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 3),
      {.name = "qkv", .in = 8, .out = 24, .mode = nn::Parallel::column, .groups = 3});
  nn::VocabParallelEmbedding emb1(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 3),
                                  {.vocab = 50, .max_seq = 4, .channels = 8});
  const Tensor c_full = col1.weight().value, r_full = row1.weight().value;
  const Tensor q_full = qkv1.weight().value, e_full = emb1.wte().value;
  EXPECT_EQ(c_full.to_vector(), normal_init({12, 8}, 3, "c.weight", 0.02f).to_vector());
  comm::run_local(tp, [&](comm::ProcessGroup& world) {
    comm::Grid grid(world, "tp-dp", {{"tp", tp}});
    auto g = grid.group_ptr("tp");
    const int r = g->rank();
    nn::Linear col(ctx_of(g, parallel::SequenceParallel::off, DType::f32, 3),
                   {.name = "c", .in = 8, .out = 12, .mode = nn::Parallel::column});
    nn::Linear row(ctx_of(g, parallel::SequenceParallel::off, DType::f32, 3),
                   {.name = "r", .in = 8, .out = 12, .mode = nn::Parallel::row});
    nn::Linear qkv(
        ctx_of(g, parallel::SequenceParallel::off, DType::f32, 3),
        {.name = "qkv", .in = 8, .out = 24, .mode = nn::Parallel::column, .groups = 3});
    nn::VocabParallelEmbedding emb(ctx_of(g, parallel::SequenceParallel::off, DType::f32, 3),
                                   {.vocab = 50, .max_seq = 4, .channels = 8});
    EXPECT_EQ(col.weight().value.to_vector(),
              slice_along(exec_of(c_full), c_full, 0, tp, r).to_vector());
    EXPECT_EQ(row.weight().value.to_vector(),
              slice_along(exec_of(r_full), r_full, 1, tp, r).to_vector());
    EXPECT_EQ(emb.wte().value.to_vector(),
              slice_along(exec_of(e_full), e_full, 0, tp, r).to_vector());
    // Fused QKV: this rank's rows of each of q, k and v.
    std::vector<float> expect;
    for (int b = 0; b < 3; ++b) {
      std::vector<float> part =
          slice_along(exec_of(q_full), slice_along(exec_of(q_full), q_full, 0, 3, b), 0, tp, r)
              .to_vector();
      expect.insert(expect.end(), part.begin(), part.end());
    }
    EXPECT_EQ(qkv.weight().value.to_vector(), expect);
  });
}

INSTANTIATE_TEST_SUITE_P(Tp, TpInvariantInit, ::testing::Values(2, 4),
                         [](const auto& p) { return "tp" + std::to_string(p.param); });

}  // namespace
}  // namespace weft::parallel
