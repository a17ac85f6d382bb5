// Generation with the key/value cache (infer/): the cached logits against a
// full forward of the whole sequence, cached greedy ids against the
// recomputing path for GPT-2's shape (learned positions), Llama's (rotary,
// grouped-query, also with KV heads replicated over TP) and a MoE model, at
// TP 1 and 2, a batch against its prompts one by one, past the end of the
// context, the end-of-sequence id; and the sampler: determinism for a seed,
// the support top-k and top-p leave.
#include "weft/infer/generate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "testing.h"
#include "weft/comm/grid.h"
#include "weft/comm/local.h"
#include "weft/core/threads.h"
#include "weft/infer/kv_cache.h"
#include "weft/infer/sampling.h"
#include "weft/parallel/context.h"

namespace weft::infer {
namespace {

nn::GptConfig model_config(const std::string& family) {
  const std::string preset = family == "llama-kv1"    ? "llama-tiny"
                             : family == "llama-bf16" ? "llama-tiny"
                                                      : family;
  nn::GptConfig c = nn::gpt_preset(preset);
  c.layers = 2;
  c.seq = 40;
  if (family == "llama-kv1") c.kv_heads = 1;  // at TP 2 each rank holds a replica
  return c;
}

std::vector<int32_t> random_ids(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) id = static_cast<int32_t>(gen() % static_cast<uint32_t>(vocab));
  return ids;
}

// Runs fn(model) on every rank of a TP group of `tp` local ranks.
template <typename Fn>
void on_tp(int tp, const nn::GptConfig& cfg, Fn&& fn) {
  comm::run_local(tp, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    comm::Grid grid(world, "tp-dp", {{"tp", tp}});
    nn::Gpt model(
        parallel::make_context(grid.group_ptr("tp"), parallel::SequenceParallel::off, {}, 5), cfg);
    fn(model, world.rank());
  });
}

class CachedLogits : public ::testing::TestWithParam<std::string> {};

// Two sequences of different lengths: prompts of 7 and 3 tokens in one
// prefill, then four steps of one token each; every logit row against the
// row of a full forward over the whole sequence at that position (f32, and
// bf16 at bf16's tolerance).
TEST_P(CachedLogits, MatchAFullForwardAtEveryPosition) {
  set_num_threads(1);
  const nn::GptConfig cfg = model_config(GetParam());
  const bool bf16 = GetParam() == "llama-bf16";
  nn::Gpt model(parallel::make_context(nullptr, parallel::SequenceParallel::off,
                                       parallel::Precision::of(bf16 ? DType::bf16 : DType::f32), 5),
                cfg);
  const testing::Tolerance tol = bf16 ? testing::kBF16 : testing::kF32;
  const int64_t total = 11, vp = nn::padded_vocab_size(cfg.vocab, cfg.vocab_pad);
  const std::vector<std::vector<int32_t>> seqs{random_ids(total, cfg.vocab, 1),
                                               random_ids(total, cfg.vocab, 2)};
  std::vector<std::vector<float>> full;
  for (const auto& s : seqs) {
    nn::Ctx ctx(nullptr, false);
    full.push_back(model.forward(ctx, Tensor::from_i32({1, total}, s)).to(DType::f32).to_vector());
  }
  // Row t of sequence b of the full forward.
  auto want = [&](size_t b, int64_t t) {
    const auto first = full[b].begin() + t * vp;
    return std::vector<double>(first, first + vp);
  };
  KvCache cache(model, 2);
  const std::vector<int64_t> prompt{7, 3};
  std::vector<int32_t> ids(14, 0);
  for (size_t b = 0; b < 2; ++b) {
    std::copy_n(seqs[b].begin(), prompt[b], ids.begin() + static_cast<int64_t>(b) * 7);
  }
  nn::Ctx ctx(nullptr, false);
  const std::vector<int64_t> last{6, 2};
  Tensor logits = model.forward_cached(ctx, Tensor::from_i32({2, 7}, ids), cache.views(), last);
  ASSERT_EQ(logits.shape(), (Shape{2, vp}));
  for (size_t b = 0; b < 2; ++b) {
    EXPECT_TRUE(testing::close(want(b, prompt[b] - 1),
                               logits.rows(static_cast<int64_t>(b), 1).to(DType::f32).to_vector(),
                               tol, 1.0))
        << "prompt " << b;
    cache.set_length(static_cast<int64_t>(b), prompt[b]);
  }
  for (int step = 0; step < 4; ++step) {
    std::vector<int32_t> next;
    for (size_t b = 0; b < 2; ++b) next.push_back(seqs[b][static_cast<size_t>(cache.length(b))]);
    nn::Ctx sctx(nullptr, false);
    logits = model.forward_cached(sctx, Tensor::from_i32({2, 1}, next), cache.views(),
                                  std::vector<int64_t>{0, 0});
    for (size_t b = 0; b < 2; ++b) {
      const int64_t pos = cache.length(static_cast<int64_t>(b));
      EXPECT_TRUE(testing::close(want(b, pos),
                                 logits.rows(static_cast<int64_t>(b), 1).to(DType::f32).to_vector(),
                                 tol, 1.0))
          << "sequence " << b << " position " << pos;
      cache.set_length(static_cast<int64_t>(b), pos + 1);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, CachedLogits,
                         ::testing::Values("tiny", "llama-tiny", "llama-kv1", "moe-tiny",
                                           "llama-bf16"),
                         [](const auto& p) {
                           std::string n = p.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

struct GreedyCase {
  std::string family;
  int tp;
  friend std::ostream& operator<<(std::ostream& os, const GreedyCase& c) {
    return os << c.family << " at tp " << c.tp;
  }
};

class CachedGreedy : public ::testing::TestWithParam<GreedyCase> {};

// Three prompts of 5, 12 and 30 tokens, 16 new tokens each: the last passes
// the context of 40 and goes on recomputing. Cached and batched, cached one
// by one and recomputing give the same ids, on every rank, at TP 1 and 2.
TEST_P(CachedGreedy, IdsMatchTheRecomputingPathAndOneByOne) {
  const GreedyCase c = GetParam();
  const nn::GptConfig cfg = model_config(c.family);
  const std::vector<std::vector<int32_t>> prompts{
      random_ids(5, cfg.vocab, 11), random_ids(12, cfg.vocab, 12), random_ids(30, cfg.vocab, 13)};
  const GenerateOptions greedy{.tokens = 16, .temperature = 0.0f};
  GenerateOptions recompute = greedy;
  recompute.cache = false;
  std::vector<std::vector<std::vector<int32_t>>> per_rank(static_cast<size_t>(c.tp));
  on_tp(c.tp, cfg, [&](nn::Gpt& model, int rank) {
    ASSERT_TRUE(cache_supported(model));
    const auto batched = generate(model, prompts, greedy);
    ASSERT_EQ(batched.size(), prompts.size());
    for (size_t p = 0; p < prompts.size(); ++p) {
      EXPECT_EQ(batched[p].size(), 16u);
      EXPECT_EQ(batched[p], generate(model, prompts[p], greedy)) << "prompt " << p << " alone";
      EXPECT_EQ(batched[p], generate(model, prompts[p], recompute)) << "prompt " << p;
    }
    per_rank[static_cast<size_t>(rank)] = batched;
  });
  for (size_t r = 1; r < per_rank.size(); ++r) EXPECT_EQ(per_rank[r], per_rank[0]) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Families, CachedGreedy,
                         ::testing::Values(GreedyCase{"tiny", 1}, GreedyCase{"tiny", 2},
                                           GreedyCase{"llama-tiny", 1}, GreedyCase{"llama-tiny", 2},
                                           GreedyCase{"llama-kv1", 2}, GreedyCase{"moe-tiny", 1},
                                           GreedyCase{"moe-tiny", 2}),
                         [](const auto& p) {
                           std::string n = p.param.family;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n + "_tp" + std::to_string(p.param.tp);
                         });

TEST(Generate, SamplingIsTheSameForASeedAloneOrInABatch) {
  set_num_threads(1);
  const nn::GptConfig cfg = model_config("llama-tiny");
  nn::Gpt model(parallel::make_context(nullptr, parallel::SequenceParallel::off, {}, 5), cfg);
  const std::vector<std::vector<int32_t>> prompts{random_ids(4, cfg.vocab, 21),
                                                  random_ids(9, cfg.vocab, 22)};
  // A high temperature, so the draws decide.
  GenerateOptions o{.tokens = 12, .temperature = 2.0f, .top_k = 0, .top_p = 0.9f, .seed = 7};
  const auto a = generate(model, prompts, o), b = generate(model, prompts, o);
  EXPECT_EQ(a, b);
  // Prompt i samples with seed + i.
  GenerateOptions second = o;
  second.seed = o.seed + 1;
  EXPECT_EQ(a[1], generate(model, prompts[1], second));
  o.seed = 8;
  EXPECT_NE(generate(model, prompts, o), a);
}

TEST(Generate, StopsAfterTheEndOfSequenceId) {
  set_num_threads(1);
  const nn::GptConfig cfg = model_config("tiny");
  nn::Gpt model(parallel::make_context(nullptr, parallel::SequenceParallel::off, {}, 5), cfg);
  const std::vector<int32_t> prompt = random_ids(6, cfg.vocab, 31);
  GenerateOptions o{.tokens = 10, .temperature = 0.0f};
  const std::vector<int32_t> all = generate(model, prompt, o);
  ASSERT_EQ(all.size(), 10u);
  o.eos = all[3];
  const auto end = std::find(all.begin(), all.end(), o.eos) + 1;
  for (bool cache : {true, false}) {
    o.cache = cache;
    EXPECT_EQ(generate(model, prompt, o), std::vector<int32_t>(all.begin(), end))
        << "cache " << cache;
  }
}

TEST(Generate, PromptsTheContextCannotHoldAreRefused) {
  set_num_threads(1);
  const nn::GptConfig cfg = model_config("tiny");
  nn::Gpt model(parallel::make_context(nullptr, parallel::SequenceParallel::off, {}, 5), cfg);
  const std::string e = testing::error_of([&] {
    generate(model, {random_ids(3, cfg.vocab, 1), random_ids(41, cfg.vocab, 2)}, {});
  });
  EXPECT_NE(e.find("prompt 2 has 41 tokens, more than the model's context of 40: shorten it"),
            std::string::npos)
      << e;
}

// How often each id is drawn from `logits` in n draws.
std::map<int32_t, int> counts(const Sampling& s, const std::vector<float>& logits, int n) {
  Sampler sampler(s, 99);
  std::map<int32_t, int> seen;
  for (int i = 0; i < n; ++i) ++seen[sampler.next(logits)];
  return seen;
}

TEST(Sampler, GreedyTakesTheLargestLogitAndTheLowestIdOnATie) {
  Sampler s({.temperature = 0.0f}, 1);
  EXPECT_EQ(s.next(std::vector<float>{0.1f, 3.0f, -1.0f, 3.0f}), 1);
}

TEST(Sampler, TopKLeavesTheKMostLikely) {
  // Probabilities in proportion to 8, 4, 2, 1, 1 (logits their logs).
  const std::vector<float> logits{std::log(2.0f), std::log(8.0f), std::log(1.0f), std::log(4.0f),
                                  std::log(1.0f)};
  const auto seen = counts({.temperature = 1.0f, .top_k = 2}, logits, 3000);
  ASSERT_EQ(seen.size(), 2u);
  // 8 : 4 among the two kept: 2/3 and 1/3.
  EXPECT_NEAR(seen.at(1) / 3000.0, 2.0 / 3.0, 0.03);
  EXPECT_NEAR(seen.at(3) / 3000.0, 1.0 / 3.0, 0.03);
  // Without top-k every token is drawn.
  EXPECT_EQ(counts({.temperature = 1.0f, .top_k = 0}, logits, 3000).size(), 5u);
}

TEST(Sampler, TopPLeavesTheFewestReachingP) {
  // Probabilities 0.5, 0.3, 0.1, 0.1: top-p 0.75 keeps the first two (0.8),
  // top-p 0.85 the first three.
  const std::vector<float> logits{std::log(0.1f), std::log(0.5f), std::log(0.1f), std::log(0.3f)};
  const auto two = counts({.temperature = 1.0f, .top_k = 0, .top_p = 0.75f}, logits, 4000);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_NEAR(two.at(1) / 4000.0, 0.5 / 0.8, 0.03);
  EXPECT_NEAR(two.at(3) / 4000.0, 0.3 / 0.8, 0.03);
  const auto three = counts({.temperature = 1.0f, .top_k = 0, .top_p = 0.85f}, logits, 4000);
  EXPECT_EQ(three.size(), 3u);
  EXPECT_EQ(three.count(0) + three.count(2), 1u);
  // Top-k applies first: k = 1 leaves one token whatever p.
  EXPECT_EQ(counts({.temperature = 1.0f, .top_k = 1, .top_p = 0.99f}, logits, 200).size(), 1u);
}

TEST(Sampler, TheSameSeedDrawsTheSameTokens) {
  const std::vector<float> logits = testing::random_tensor({300}, 5, -2.0f, 2.0f).to_vector();
  Sampler a({.temperature = 1.0f, .top_k = 0}, 3), b({.temperature = 1.0f, .top_k = 0}, 3),
      c({.temperature = 1.0f, .top_k = 0}, 4);
  std::vector<int32_t> x, y, z;
  for (int i = 0; i < 50; ++i) {
    x.push_back(a.next(logits));
    y.push_back(b.next(logits));
    z.push_back(c.next(logits));
  }
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
}

TEST(Sampler, OptionsOutOfRangeAreNamed) {
  EXPECT_NE(testing::error_of([] { check(Sampling{.top_p = 0.0f}); }).find("--top-p"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { check(Sampling{.temperature = -1.0f}); }).find("--temperature"),
            std::string::npos);
}

}  // namespace
}  // namespace weft::infer
