// The transformer modules on their own: finite-difference gradients at TP=1,
// dropout streams, collective counts per forward and backward, the partition
// plan, re-sharding, bf16 compute, parameter names and specs, and errors.
// (TP equivalence with TP=1 is in layer_cases.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>

#include "contexts.h"
#include "testing.h"
#include "tp_harness.h"
#include "weft/comm/grid.h"
#include "weft/comm/local.h"
#include "weft/core/threads.h"
#include "weft/nn/attention.h"
#include "weft/nn/layernorm_linear.h"
#include "weft/nn/layernorm_mlp.h"
#include "weft/nn/norm.h"
#include "weft/nn/partition.h"
#include "weft/nn/transformer_layer.h"

namespace weft::nn::testing {
namespace {

using comm::OpKind;
using weft::testing::finite_difference;
using weft::testing::Tolerance;
using weft::testing::weighted_sum;

constexpr int64_t B = 4, T = 4, C = 8, H = 2;
// Central differences of an f32 loss of ~100 O(1) terms: a step of 3e-3
// balances the rounding of the loss (which grows as the step shrinks) against
// the truncation error (which grows with it); both stay near 2e-4, so the
// comparison is relative to the largest gradient of the tensor.
constexpr double kStep = 3e-3;
constexpr Tolerance kFiniteDifference{2e-3, 1e-4};

// Thousands of forwards of tiny shapes: one thread each, no OpenMP overhead.
class ModuleGradients : public ::testing::Test {
 protected:
  void SetUp() override { set_num_threads(1); }
  void TearDown() override { set_num_threads(0); }
};

using weft::testing::error_of;

double max_abs(const Tensor& t) {
  double m = 0;
  for (float v : t.to_vector()) m = std::max(m, static_cast<double>(std::abs(v)));
  return m;
}

// The gradient of loss() with respect to every element of t, by central
// differences, against `grad`.
::testing::AssertionResult matches_finite_differences(Tensor& t,
                                                      const std::function<double()>& loss,
                                                      const Tensor& grad) {
  return close(finite_difference(t, loss, kStep), grad.to_vector(), kFiniteDifference,
               std::max(max_abs(grad), 1e-2));
}

// ---------------------------------------------------------------------------
// Finite differences at TP=1 (f32): the input gradient and every parameter
// gradient of loss = Σ w·y. With rng_seed != 0 every evaluation runs with a
// fresh RngTracker of that seed, so dropout masks are the same each time.

void expect_gradients_match_finite_differences(Module& m, Tensor x, uint64_t rng_seed = 0) {
  auto run_forward = [&](Ctx& ctx) { return m.forward(ctx, x); };
  parallel::RngTracker tracker(rng_seed, 0);
  Ctx ctx(rng_seed ? &tracker : nullptr);
  Tensor y = run_forward(ctx);
  Tensor w = random_tensor(y.shape(), 99);
  m.zero_grad();
  Tensor dx = m.backward(ctx, w);
  auto loss = [&] {
    parallel::RngTracker fresh(rng_seed, 0);
    Ctx c(rng_seed ? &fresh : nullptr);
    return weighted_sum(run_forward(c), w);
  };
  {
    SCOPED_TRACE("input");
    EXPECT_TRUE(matches_finite_differences(x, loss, dx));
  }
  for (Parameter* p : m.parameters()) {
    SCOPED_TRACE(p->name);
    EXPECT_TRUE(matches_finite_differences(p->value, loss, p->grad));
  }
}

Tensor input() { return random_tensor({B, T, C}, 5); }

TEST_F(ModuleGradients, LayerNorm) {
  LayerNorm m(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 0),
              {.name = "ln", .width = C});
  // Non-trivial gamma and beta, so their gradients reach every term.
  m.weight().value.copy_from(random_tensor({C}, 1, 0.5f, 1.5f));
  m.bias()->value.copy_from(random_tensor({C}, 2));
  expect_gradients_match_finite_differences(m, input());
}

TEST_F(ModuleGradients, RMSNorm) {
  RMSNorm m(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 0),
            {.name = "ln", .width = C});
  m.weight().value.copy_from(random_tensor({C}, 1, 0.5f, 1.5f));
  EXPECT_EQ(m.bias(), nullptr);
  expect_gradients_match_finite_differences(m, input());
}

TEST_F(ModuleGradients, LayerNormLinearWithNormOutput) {
  LayerNormLinear m(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 1),
                    {.name = "qkv",
                     .norm_name = "ln",
                     .in = C,
                     .out = 3 * C,
                     .init_std = 0.3f,
                     .groups = 3,
                     .return_layernorm_output = true});
  Tensor x = input();
  Ctx ctx;
  LayerNormLinear::Outputs o = m.forward_both(ctx, x);
  ASSERT_TRUE(o.norm.defined());
  Tensor wy = random_tensor(o.y.shape(), 3), wn = random_tensor(o.norm.shape(), 4);
  Tensor dx = m.backward_both(ctx, wy, wn);
  auto loss = [&] {
    Ctx c;
    LayerNormLinear::Outputs r = m.forward_both(c, x);
    return weighted_sum(r.y, wy) + weighted_sum(r.norm, wn);
  };
  EXPECT_TRUE(matches_finite_differences(x, loss, dx));
  for (Parameter* p : m.parameters()) {
    SCOPED_TRACE(p->name);
    EXPECT_TRUE(matches_finite_differences(p->value, loss, p->grad));
  }
}

TEST_F(ModuleGradients, LayerNormLinear) {
  LayerNormLinear m(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 2),
                    {.name = "fc", .norm_name = "ln", .in = C, .out = 12, .norm = NormKind::rms});
  expect_gradients_match_finite_differences(m, input());
}

TEST_F(ModuleGradients, LayerNormMLP) {
  LayerNormMLP m(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 3),
                 {.name = "mlp", .norm_name = "ln_2", .width = C, .init_std = 0.3f, .layers = 2});
  expect_gradients_match_finite_differences(m, input());
}

TEST_F(ModuleGradients, MultiheadAttention) {
  MultiheadAttention m(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 4),
                       {.name = "attn", .width = C, .heads = H, .init_std = 0.3f});
  expect_gradients_match_finite_differences(m, input());
}

TEST_F(ModuleGradients, MultiheadAttentionWithInputNormAndDropout) {
  MultiheadAttention m(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 4),
                       {.name = "attn",
                        .input_norm = "ln_1",
                        .width = C,
                        .heads = H,
                        .dropout = 0.25f,
                        .init_std = 0.3f});
  expect_gradients_match_finite_differences(m, input(), 17);
}

TEST_F(ModuleGradients, TransformerLayer) {
  TransformerLayer m(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 5),
                     {.name = "h.0", .width = C, .heads = H, .layers = 2, .init_std = 0.3f});
  expect_gradients_match_finite_differences(m, input());
}

TEST_F(ModuleGradients, TransformerLayerWithDropout) {
  TransformerLayer m(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 5),
                     {.name = "h.0",
                      .width = C,
                      .heads = H,
                      .attention_dropout = 0.2f,
                      .hidden_dropout = 0.3f,
                      .norm = NormKind::rms,
                      .init_std = 0.3f});
  expect_gradients_match_finite_differences(m, input(), 23);
}

// ---------------------------------------------------------------------------
// Dropout.

// Built with seed 8.
TransformerLayerConfig dropout_layer(const std::string& plan = "") {
  return {.name = "h.0",
          .width = C,
          .heads = H,
          .attention_dropout = 0.3f,
          .hidden_dropout = 0.3f,
          .init_std = 0.3f,
          .plan = PartitionPlan::parse(plan)};
}

TEST(Dropout, SameSeedSameMasksAndOutputs) {
  TransformerLayer m(ctx_of(nullptr, SequenceParallel::off, DType::f32, 8), dropout_layer());
  Tensor x = input();
  auto run = [&](uint64_t seed) {
    parallel::RngTracker rng(seed, 0);
    Ctx ctx(&rng);
    Tensor y = m.forward(ctx, x);
    std::vector<float> masks = m.attn().dropout_mask(ctx).to_vector();
    for (const Tensor& t : {m.dropout_masks(ctx).attn, m.dropout_masks(ctx).mlp}) {
      std::vector<float> v = t.to_vector();
      masks.insert(masks.end(), v.begin(), v.end());
    }
    return std::make_pair(y.to_vector(), masks);
  };
  auto [y1, m1] = run(42);
  auto [y2, m2] = run(42);
  auto [y3, m3] = run(43);
  EXPECT_EQ(y1, y2);
  EXPECT_EQ(m1, m2);
  EXPECT_NE(y1, y3);
  EXPECT_NE(m1, m3);
  // Some of each mask is dropped and some kept.
  EXPECT_NE(std::count(m1.begin(), m1.end(), 0.0f), 0);
  EXPECT_NE(std::count(m1.begin(), m1.end(), 1.0f), 0);
}

TEST(Dropout, OffInEvaluationWithoutRngOrAtZero) {
  TransformerLayerConfig cfg = dropout_layer();
  TransformerLayer m(ctx_of(nullptr, SequenceParallel::off, DType::f32, 8), cfg);
  cfg.attention_dropout = cfg.hidden_dropout = 0.0f;
  TransformerLayer plain(ctx_of(nullptr, SequenceParallel::off, DType::f32, 8), cfg);
  Tensor x = input();
  Ctx ref;
  std::vector<float> expected = plain.forward(ref, x).to_vector();
  parallel::RngTracker rng(1, 0);
  Ctx eval(&rng, /*training=*/false), no_rng(nullptr);
  EXPECT_EQ(m.forward(eval, x).to_vector(), expected);
  EXPECT_EQ(m.forward(no_rng, x).to_vector(), expected);
  EXPECT_FALSE(m.attn().dropout_mask(eval).defined());
  EXPECT_FALSE(m.dropout_masks(eval).attn.defined());
  // Nothing was drawn.
  EXPECT_EQ(rng.state().at(parallel::kDefaultStream).offset, 0u);
  EXPECT_EQ(rng.state().at(parallel::kModelParallelStream).offset, 0u);
  Ctx train(&rng);
  EXPECT_NE(m.forward(train, x).to_vector(), expected);
}

// Per-rank results of one forward at TP=2: the attention-probability mask,
// the residual masks, the output, and how far each stream advanced.
struct RankDropout {
  std::vector<float> attn_mask, residual_masks, y;
  uint64_t default_drawn = 0, model_parallel_drawn = 0;
};

std::vector<RankDropout> dropout_at_tp2(TransformerLayerConfig cfg,
                                        SequenceParallel sp = SequenceParallel::off) {
  std::vector<RankDropout> out(2);
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    comm::Grid grid(world, "tp-dp", {{"tp", 2}});
    auto tp = grid.group_ptr("tp");
    TransformerLayer m(ctx_of(tp, sp, DType::f32, 8), cfg);
    parallel::RngTracker rng(77, tp->rank());
    Ctx ctx(&rng);
    RankDropout& r = out[static_cast<size_t>(tp->rank())];
    r.y = m.forward(ctx, local_tokens(input(), sp, *tp)).to_vector();
    r.attn_mask = m.attn().dropout_mask(ctx).to_vector();
    r.residual_masks = m.dropout_masks(ctx).attn.to_vector();
    std::vector<float> more = m.dropout_masks(ctx).mlp.to_vector();
    r.residual_masks.insert(r.residual_masks.end(), more.begin(), more.end());
    r.default_drawn = rng.state().at(parallel::kDefaultStream).offset;
    r.model_parallel_drawn = rng.state().at(parallel::kModelParallelStream).offset;
  });
  return out;
}

TEST(Dropout, TpRanksDifferInsideTpRegionsAndAgreeOutside) {
  std::vector<RankDropout> r = dropout_at_tp2(dropout_layer());
  // Attention probabilities (one head per rank): the model-parallel stream,
  // seeded per rank, so the masks differ although their shapes and offsets
  // are the same.
  ASSERT_EQ(r[0].attn_mask.size(), static_cast<size_t>(B * 1 * T * T));
  EXPECT_NE(r[0].attn_mask, r[1].attn_mask);
  // Residual dropout on replicated activations: the default stream, the same
  // masks, and so the same outputs on both ranks.
  ASSERT_EQ(r[0].residual_masks.size(), static_cast<size_t>(2 * B * T * C));
  EXPECT_EQ(r[0].residual_masks, r[1].residual_masks);
  EXPECT_EQ(r[0].y, r[1].y);
  for (const RankDropout& rank : r) {
    EXPECT_EQ(rank.model_parallel_drawn, static_cast<uint64_t>(B * 1 * T * T));
    EXPECT_EQ(rank.default_drawn, static_cast<uint64_t>(2 * B * T * C));
  }
}

TEST(Dropout, SequenceParallelLayerUsesTheModelParallelStream) {
  for (SequenceParallel sp : {SequenceParallel::seq, SequenceParallel::batch}) {
    SCOPED_TRACE(sequence_parallel_name(sp));
    std::vector<RankDropout> r = dropout_at_tp2(dropout_layer(), sp);
    EXPECT_NE(r[0].residual_masks, r[1].residual_masks);
    for (const RankDropout& rank : r) {
      EXPECT_EQ(rank.default_drawn, 0u);
      // B·H_local·T·T for attention, then the two residual branches of this
      // rank's half of the tokens.
      EXPECT_EQ(rank.model_parallel_drawn, static_cast<uint64_t>(B * 1 * T * T + B * T * C));
    }
  }
}

TEST(Dropout, ReplicatedAttentionWithoutSpAgreesAcrossRanks) {
  std::vector<RankDropout> r = dropout_at_tp2(dropout_layer("*=replicate"));
  ASSERT_EQ(r[0].attn_mask.size(), static_cast<size_t>(B * H * T * T));
  EXPECT_EQ(r[0].attn_mask, r[1].attn_mask);
  EXPECT_EQ(r[0].y, r[1].y);
  EXPECT_EQ(r[0].model_parallel_drawn, 0u);
}

// ---------------------------------------------------------------------------
// Collectives per forward and backward on the TP group.

struct Counts {
  int64_t all_gather = 0, reduce_scatter = 0, all_reduce = 0;
};
struct Expected {
  Counts forward, backward;
};

void expect_counts(const comm::CommStats& s, const Counts& e, int64_t bytes_each) {
  EXPECT_EQ(s.count(OpKind::all_gather), e.all_gather);
  EXPECT_EQ(s.count(OpKind::reduce_scatter), e.reduce_scatter);
  EXPECT_EQ(s.count(OpKind::all_reduce), e.all_reduce);
  EXPECT_EQ(s.total_calls(), e.all_gather + e.reduce_scatter + e.all_reduce);
  if (bytes_each >= 0) {
    EXPECT_EQ(s.bytes_of(OpKind::all_gather), e.all_gather * bytes_each);
    EXPECT_EQ(s.bytes_of(OpKind::reduce_scatter), e.reduce_scatter * bytes_each);
    EXPECT_EQ(s.bytes_of(OpKind::all_reduce), e.all_reduce * bytes_each);
  }
}

// Runs one forward and backward of M(cfg) at `tp_size` ranks and checks the
// collectives each issued on the TP group. bytes_each >= 0: the size of every
// collective (all of them move one (B, T, C) activation).
template <typename M, typename Cfg>
void check_collectives(int tp_size, const Cfg& cfg, SequenceParallel sp, Expected e,
                       int64_t bytes_each = -1, DType compute = DType::f32) {
  SCOPED_TRACE(format("tp {} sp {}", tp_size, sequence_parallel_name(sp)));
  comm::run_local(tp_size, [&](comm::ProcessGroup& world) {
    comm::Grid grid(world, "tp-dp", {{"tp", tp_size}});
    auto tp = grid.group_ptr("tp");
    M m(ctx_of(tp, sp, compute), cfg);
    Ctx ctx;
    tp->reset_stats();
    Tensor y = m.forward(ctx, local_tokens(input(), sp, *tp));
    expect_counts(tp->stats(), e.forward, bytes_each);
    tp->reset_stats();
    m.backward(ctx, random_tensor(y.shape(), 3));
    expect_counts(tp->stats(), e.backward, bytes_each);
  });
}

constexpr Expected kNone{};
constexpr Counts kOneAllReduce{.all_reduce = 1};
constexpr Counts kGatherAndScatter{.all_gather = 1, .reduce_scatter = 1};

// A column-parallel layer then a row-parallel one (MLP, attention). Under SP
// backward gathers twice: the row layer's output gradient, and the column
// layer's input again (it saved only its shard), as Megatron does.
Expected megatron_pair(SequenceParallel sp) {
  if (sp == SequenceParallel::off) return {kOneAllReduce, kOneAllReduce};
  return {kGatherAndScatter, {.all_gather = 2, .reduce_scatter = 1}};
}

const SequenceParallel kAllSp[] = {SequenceParallel::off, SequenceParallel::seq,
                                   SequenceParallel::batch};

TEST(Collectives, Norms) {
  for (SequenceParallel sp : kAllSp) {
    check_collectives<LayerNorm>(2, NormConfig{.name = "ln", .width = C}, sp, kNone);
    check_collectives<RMSNorm>(4, NormConfig{.name = "ln", .width = C}, sp, kNone);
  }
}

TEST(Collectives, LayerNormLinear) {
  LayerNormLinearConfig cfg{.name = "qkv", .norm_name = "ln", .in = C, .out = 3 * C};
  for (int tp : {2, 4}) {
    check_collectives<LayerNormLinear>(tp, cfg, SequenceParallel::off, {{}, kOneAllReduce});
    // Backward under SP: the input shard is gathered again for wgrad.
    check_collectives<LayerNormLinear>(tp, cfg, SequenceParallel::seq,
                                       {{.all_gather = 1}, kGatherAndScatter});
    check_collectives<LayerNormLinear>(tp, cfg, SequenceParallel::batch,
                                       {{.all_gather = 1}, kGatherAndScatter});
  }
  cfg.mode = Parallel::none;
  for (SequenceParallel sp : kAllSp) check_collectives<LayerNormLinear>(2, cfg, sp, kNone);
}

TEST(Collectives, LayerNormMLP) {
  LayerNormMLPConfig cfg{.name = "mlp", .norm_name = "ln_2", .width = C};
  for (int tp : {2, 4}) {
    for (SequenceParallel sp : kAllSp) {
      check_collectives<LayerNormMLP>(tp, cfg, sp, megatron_pair(sp), B * T * C * 4);
    }
  }
  cfg.partition = Partition::replicate;
  for (SequenceParallel sp : kAllSp) check_collectives<LayerNormMLP>(2, cfg, sp, kNone);
}

// Four heads (of width 2), so that TP 4 splits them too: H = 2 cannot.
constexpr int64_t kHeads4 = 4;
static_assert(C % kHeads4 == 0);

TEST(Collectives, MultiheadAttention) {
  MultiheadAttentionConfig cfg{.name = "attn", .input_norm = "ln_1", .width = C, .heads = kHeads4};
  for (int tp : {2, 4}) {
    for (SequenceParallel sp : kAllSp) {
      check_collectives<MultiheadAttention>(tp, cfg, sp, megatron_pair(sp), B * T * C * 4);
    }
  }
  // Replicated: only sequence SP communicates (attention needs every position).
  cfg.partition = Partition::replicate;
  check_collectives<MultiheadAttention>(2, cfg, SequenceParallel::off, kNone);
  check_collectives<MultiheadAttention>(2, cfg, SequenceParallel::batch, kNone);
  check_collectives<MultiheadAttention>(4, cfg, SequenceParallel::seq,
                                        {{.all_gather = 1}, {.reduce_scatter = 1}}, B * T * C * 4);
}

TEST(Collectives, TransformerLayer) {
  for (DType dt : {DType::f32, DType::bf16}) {
    TransformerLayerConfig cfg{.name = "h.0", .width = C, .heads = kHeads4};
    const int64_t bytes = B * T * C * (dt == DType::f32 ? 4 : 2);
    for (int tp : {2, 4}) {
      check_collectives<TransformerLayer>(tp, cfg, SequenceParallel::off,
                                          {{.all_reduce = 2}, {.all_reduce = 2}}, bytes, dt);
      for (SequenceParallel sp : {SequenceParallel::seq, SequenceParallel::batch}) {
        check_collectives<TransformerLayer>(
            tp, cfg, sp,
            {{.all_gather = 2, .reduce_scatter = 2}, {.all_gather = 4, .reduce_scatter = 2}}, bytes,
            dt);
      }
    }
  }
}

TEST(Collectives, TransformerLayerWithReplicatedParts) {
  TransformerLayerConfig cfg{.name = "h.0", .width = C, .heads = H};
  cfg.plan = PartitionPlan::parse("h.*.mlp=replicate");
  for (SequenceParallel sp : kAllSp) {
    check_collectives<TransformerLayer>(2, cfg, sp, megatron_pair(sp));
  }
  cfg.plan = PartitionPlan::parse("*=replicate");
  check_collectives<TransformerLayer>(2, cfg, SequenceParallel::off, kNone);
  check_collectives<TransformerLayer>(2, cfg, SequenceParallel::batch, kNone);
  check_collectives<TransformerLayer>(2, cfg, SequenceParallel::seq,
                                      {{.all_gather = 1}, {.reduce_scatter = 1}});
}

TEST(Collectives, NoneAtTp1) {
  TransformerLayerConfig cfg{.name = "h.0", .width = C, .heads = H};
  for (SequenceParallel sp : kAllSp) check_collectives<TransformerLayer>(1, cfg, sp, kNone);
}

// ---------------------------------------------------------------------------
// Parameters: names, specs, initialization.

TEST(Parameters, TransformerLayerNamesAndSpecs) {
  comm::run_local(2, [](comm::ProcessGroup& world) {
    comm::Grid grid(world, "tp-dp", {{"tp", 2}});
    TransformerLayer m(ctx_of(grid.group_ptr("tp"), SequenceParallel::seq, DType::f32, 0),
                       {.name = "h.3", .width = C, .heads = H});
    std::vector<std::string> names;
    for (Parameter* p : m.parameters()) names.push_back(p->name);
    EXPECT_EQ(names, (std::vector<std::string>{
                         "h.3.ln_1.weight", "h.3.ln_1.bias", "h.3.attn.qkv.weight",
                         "h.3.attn.qkv.bias", "h.3.attn.proj.weight", "h.3.attn.proj.bias",
                         "h.3.ln_2.weight", "h.3.ln_2.bias", "h.3.mlp.fc1.weight",
                         "h.3.mlp.fc1.bias", "h.3.mlp.fc2.weight", "h.3.mlp.fc2.bias"}));
    const std::vector<std::string> replicated{"tp", "cp", "gtp", "ep", "dp"};
    for (Parameter* p : m.parameters()) {
      SCOPED_TRACE(p->name);
      const bool is_norm = p->name.find(".ln_") != std::string::npos;
      const bool row_bias = p->name == "h.3.attn.proj.bias" || p->name == "h.3.mlp.fc2.bias";
      if (is_norm || row_bias) {
        EXPECT_FALSE(p->spec.is_split());
        EXPECT_EQ(p->spec.replicated_over, replicated);
        EXPECT_EQ(p->grad_sum_group, grid.group_ptr("tp"));
      } else {
        EXPECT_TRUE(p->spec.is_split());
        EXPECT_EQ(p->grad_sum_group, nullptr);
      }
    }
    EXPECT_EQ(m.attn().qkv().weight().spec.blocks, 3);
    EXPECT_EQ(m.attn().qkv().weight().spec.split_dim, 0);
    EXPECT_EQ(m.attn().proj().weight().spec.split_dim, 1);
    EXPECT_EQ(m.mlp().fc1().linear().weight().spec.split_dim, 0);
    EXPECT_EQ(m.mlp().fc2().weight().spec.split_dim, 1);
    EXPECT_EQ(m.attn().local_heads(), H / 2);
  });
}

TEST(Parameters, NormsStartAtOneAndZero) {
  LayerNorm ln(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 0),
               {.name = "ln", .width = C});
  EXPECT_EQ(ln.weight().value.to_vector(), std::vector<float>(C, 1.0f));
  EXPECT_EQ(ln.bias()->value.to_vector(), std::vector<float>(C, 0.0f));
  EXPECT_EQ(ln.weight().spec.replicated_over, (std::vector<std::string>{"cp", "gtp", "ep", "dp"}));
  EXPECT_EQ(ln.weight().grad_sum_group, nullptr);
}

double sample_std(const Tensor& t) {
  std::vector<float> v = t.to_vector();
  double s = 0, s2 = 0;
  for (float x : v) {
    s += x;
    s2 += static_cast<double>(x) * x;
  }
  const double n = static_cast<double>(v.size());
  return std::sqrt(s2 / n - (s / n) * (s / n));
}

TEST(Parameters, ResidualProjectionsAreScaledByDepth) {
  const int64_t width = 64, layers = 12;
  TransformerLayer m(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 0),
                     {.name = "h.0", .width = width, .heads = 4, .layers = layers});
  const double residual = 0.02 / std::sqrt(2.0 * layers);
  EXPECT_NEAR(sample_std(m.attn().qkv().weight().value), 0.02, 0.02 * 0.05);
  EXPECT_NEAR(sample_std(m.mlp().fc1().linear().weight().value), 0.02, 0.02 * 0.05);
  EXPECT_NEAR(sample_std(m.attn().proj().weight().value), residual, residual * 0.05);
  EXPECT_NEAR(sample_std(m.mlp().fc2().weight().value), residual, residual * 0.05);
  EXPECT_EQ(m.mlp().fc1().linear().weight().value.shape(), (Shape{4 * width, width}));
}

// ---------------------------------------------------------------------------
// bf16 compute against f32 at TP=1.

TEST(Bf16, TransformerLayerMatchesF32) {
  TransformerLayerConfig cfg{.name = "h.0", .width = C, .heads = H, .init_std = 0.3f};
  TransformerLayer f32(ctx_of(nullptr, SequenceParallel::off, DType::f32, 2), cfg);
  TransformerLayer bf16(ctx_of(nullptr, SequenceParallel::off, DType::bf16, 2), cfg);
  Tensor x = input(), dy = random_tensor({B, T, C}, 8);
  Ctx a, b;
  Tensor y32 = f32.forward(a, x), y16 = bf16.forward(b, x);
  EXPECT_EQ(y16.dtype(), DType::f32);  // the residual stream keeps x's dtype
  EXPECT_TRUE(close(y32, y16, kBF16, max_abs(y32)));
  Tensor dx32 = f32.backward(a, dy), dx16 = bf16.backward(b, dy);
  EXPECT_EQ(dx16.dtype(), DType::f32);
  EXPECT_TRUE(close(dx32, dx16, kBF16, max_abs(dx32)));
  std::vector<Parameter*> p32 = f32.parameters(), p16 = bf16.parameters();
  for (size_t i = 0; i < p32.size(); ++i) {
    SCOPED_TRACE(p32[i]->name);
    EXPECT_EQ(p16[i]->value.dtype(), DType::f32);
    EXPECT_TRUE(close(p32[i]->grad, p16[i]->grad, kBF16, max_abs(p32[i]->grad)));
  }
}

TEST(Bf16, NormComputesInInputDtypeAndOutputsComputeDtype) {
  LayerNorm ln(ctx_of(nullptr, parallel::SequenceParallel::off, DType::bf16, 0),
               {.name = "ln", .width = C});
  Ctx ctx;
  Tensor x = input();
  Tensor y = ln.forward(ctx, x);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(ln.backward(ctx, y).dtype(), DType::f32);
}

// ---------------------------------------------------------------------------
// The partition plan and re-sharding.

TEST(PartitionPlan, GlobsAndFirstMatchingRuleDecide) {
  EXPECT_TRUE(glob_match("h.*.attn", "h.11.attn"));
  EXPECT_TRUE(glob_match("*", "h.0.mlp"));
  EXPECT_TRUE(glob_match("h.?.mlp", "h.3.mlp"));
  EXPECT_FALSE(glob_match("h.?.mlp", "h.10.mlp"));
  EXPECT_FALSE(glob_match("h.*.attn", "h.1.attn.qkv"));
  PartitionPlan plan = PartitionPlan::parse("h.0.*=tensor,h.*.mlp=replicate");
  EXPECT_EQ(plan.str(), "h.0.*=tensor,h.*.mlp=replicate");
  EXPECT_TRUE(plan.partitioned("h.0.mlp"));  // the first rule wins
  EXPECT_FALSE(plan.partitioned("h.1.mlp"));
  EXPECT_FALSE(plan.partitioned("h.1.mlp.fc2"));  // through the enclosing h.1.mlp
  EXPECT_TRUE(plan.partitioned("h.1.attn"));      // no rule: partitioned
  EXPECT_EQ(PartitionPlan().lookup("anything"), Partition::tensor);
  // A rule for a part decides for the module when its parts agree.
  PartitionPlan parts = PartitionPlan::parse("h.*.attn.qkv=replicate,h.*.attn.proj=replicate");
  EXPECT_EQ(parts.lookup_together("h.2.attn", {"qkv", "proj"}), Partition::replicate);
}

TEST(PartitionPlan, ReplicatedMlpInsideATpGroup) {
  comm::run_local(2, [](comm::ProcessGroup& world) {
    comm::Grid grid(world, "tp-dp", {{"tp", 2}});
    auto tp = grid.group_ptr("tp");
    TransformerLayer m(
        ctx_of(tp, SequenceParallel::batch, DType::f32, 0),
        {.name = "h.1", .width = C, .heads = H, .plan = PartitionPlan::parse("h.1.mlp=replicate")});
    EXPECT_TRUE(m.attn().partitioned());
    EXPECT_TRUE(m.attn().qkv().weight().spec.is_split());
    for (Parameter* p : m.mlp().parameters()) {
      SCOPED_TRACE(p->name);
      EXPECT_FALSE(p->spec.is_split());
      EXPECT_EQ(p->spec.replicated_over, (std::vector<std::string>{"tp", "cp", "gtp", "ep", "dp"}));
      EXPECT_EQ(p->grad_sum_group, tp);  // each rank brings its own samples
    }
  });
}

// Re-sharding takes whole parameters, or parameters split as the target's
// are at the TP level (to add generalized tensor parallelism on top).
TEST(PartitionPlan, ReshardingNeedsWholeOrEquallySplitParameters) {
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    comm::Grid grid(world, "tp-dp", {{"tp", 2}});
    auto m = std::make_unique<TransformerLayer>(
        ctx_of(grid.group_ptr("tp")),
        TransformerLayerConfig{.name = "h.0", .width = C, .heads = H});
    const std::vector<float> qkv = m->attn().qkv().weight().value.to_vector();
    set_tensor_parallel_group(m, ctx_of(grid.group_ptr("tp")));
    EXPECT_EQ(m->attn().qkv().weight().value.to_vector(), qkv);
    std::string err = error_of([&] { set_tensor_parallel_group(m, ctx_of(nullptr)); });
    EXPECT_NE(err.find("unlike the target"), std::string::npos) << err;
  });
}

// ---------------------------------------------------------------------------
// Errors a user can cause.

TEST(Errors, HeadsNotDivisibleByTp) {
  comm::run_local(4, [](comm::ProcessGroup& world) {
    comm::Grid grid(world, "tp-dp", {{"tp", 4}});
    std::string err = error_of([&] {
      MultiheadAttention m(
          ctx_of(grid.group_ptr("tp"), parallel::SequenceParallel::off, DType::f32, 0),
          {.name = "h.0.attn", .width = 24, .heads = 6});
    });
    EXPECT_NE(err.find("6 attention heads"), std::string::npos) << err;
    EXPECT_NE(err.find("tensor-parallel size 4"), std::string::npos) << err;
    // Replicated attention keeps whole heads anyway.
    MultiheadAttention ok(
        ctx_of(grid.group_ptr("tp"), parallel::SequenceParallel::off, DType::f32, 0),
        {.name = "h.0.attn", .width = 24, .heads = 6, .partition = Partition::replicate});
  });
}

TEST(Errors, Configuration) {
  std::string err = error_of([] {
    LayerNormLinear m(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 0),
                      {.name = "fc", .norm_name = "ln", .in = C, .out = C, .mode = Parallel::row});
  });
  EXPECT_NE(err.find("column-parallel only"), std::string::npos) << err;
  err = error_of([] {
    LayerNormLinear m(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 0),
                      {.name = "fc", .in = C, .out = C});
  });
  EXPECT_NE(err.find("norm_name"), std::string::npos) << err;
  err = error_of([] {
    MultiheadAttention m(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 0),
                         {.name = "a", .width = 10, .heads = 4});
  });
  EXPECT_NE(err.find("not divisible by the 4 heads"), std::string::npos) << err;
  err = error_of([] {
    TransformerLayer m(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 0),
                       {.name = "h.0",
                        .width = C,
                        .heads = H,
                        .plan = PartitionPlan::parse("h.*.attn.proj=replicate")});
  });
  EXPECT_NE(err.find("must be partitioned together"), std::string::npos) << err;
  err = error_of([] {
    TransformerLayer m(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 0),
                       {.name = "h", .width = C, .heads = H, .hidden_dropout = 1});
  });
  EXPECT_NE(err.find("hidden dropout"), std::string::npos) << err;
  err = error_of([] { PartitionPlan::parse("h.*.mlp"); });
  EXPECT_NE(err.find("pattern=tensor"), std::string::npos) << err;
  err = error_of([] { parse_partition("column"); });
  EXPECT_NE(err.find("split is fixed"), std::string::npos) << err;
  EXPECT_NE(error_of([] { parse_partition("tensr"); }).find("unknown partition"),
            std::string::npos);
  err = error_of([] {
    LayerNorm ln(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 0),
                 {.name = "ln", .width = C});
    Ctx ctx;
    ln.forward(ctx, Tensor::zeros({2, 5}));
  });
  EXPECT_NE(err.find("normalized width 8"), std::string::npos) << err;
  err = error_of([] {
    TransformerLayer m(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 0),
                       {.name = "h.0", .width = C, .heads = H});
    Ctx ctx;
    m.backward(ctx, input());
  });
  EXPECT_NE(err.find("backward without a forward"), std::string::npos) << err;
}

// ---------------------------------------------------------------------------
// The weight source and Megatron's backward order.

// A local-shard source that notes its backward calls in a shared log.
class RecordingSource : public parallel::WeightSource {
 public:
  RecordingSource(Parameter& p, std::vector<std::string>& log) : inner_(p, {}, {}), log_(log) {}
  Shape shape() const override { return inner_.shape(); }
  Tensor weight_for_forward(parallel::PassContext& pass) override {
    return inner_.weight_for_forward(pass);
  }
  Tensor weight_for_backward(parallel::PassContext& pass) override {
    log_.push_back("weight_for_backward");
    return inner_.weight_for_backward(pass);
  }
  Tensor weight_grad(parallel::PassContext& pass) override {
    log_.push_back("weight_grad");
    return inner_.weight_grad(pass);
  }
  void finalize_weight_grad(parallel::PassContext& pass, const Tensor& wgrad) override {
    log_.push_back("finalize_weight_grad");
    inner_.finalize_weight_grad(pass, wgrad);
  }
  Parameter& parameter() override { return inner_.parameter(); }

 private:
  parallel::LocalShardSource inner_;
  std::vector<std::string>& log_;
};

// Column-parallel under SP saves its input shard. Backward, in the order the
// TP group's observer and the weight source see it: the re-gather is issued
// before the dgrad GEMM asks for its weight and waited for only after the
// dgrad reduce-scatter is issued (so the gather is in flight while dgrad
// runs); the reduce-scatter is waited for after the wgrad GEMM's gradient is
// final (in flight while wgrad runs) — Megatron's order.
TEST(WeightSource, ColumnBackwardOverlapsItsCollectivesAsMegatron) {
  for (SequenceParallel sp : {SequenceParallel::seq, SequenceParallel::batch}) {
    SCOPED_TRACE(sequence_parallel_name(sp));
    comm::run_local(2, [&](comm::ProcessGroup& world) {
      comm::Grid grid(world, "tp-dp", {{"tp", 2}});
      auto tp = grid.group_ptr("tp");
      auto pc = ctx_of(tp, sp, DType::f32, 4);
      const LinearConfig cfg{.name = "fc", .in = C, .out = 2 * C, .mode = Parallel::column};
      Linear owner(pc, cfg);
      std::vector<std::string> log;
      Linear lin(pc, cfg, std::make_shared<RecordingSource>(owner.weight(), log));
      EXPECT_EQ(lin.own_parameters().size(), 1u);  // the bias: the weight is the source's
      Ctx ctx;
      Tensor x = local_tokens(input(), sp, *tp);
      Tensor y = lin.forward(ctx, x);
      EXPECT_EQ(y.size(0), 2 * x.size(0));  // every token
      Tensor dy = random_tensor(y.shape(), 5);
      // issued and wait_* arrive on this thread; completed (the worker's) is not logged.
      tp->set_observer([&](const comm::CommEvent& e) {
        if (e.kind == comm::CommEvent::Kind::completed) return;
        log.push_back(
            format("{} {}", comm::comm_event_kind_name(e.kind), comm::op_kind_name(e.op)));
      });
      Tensor dx = lin.backward(ctx, dy);
      tp->set_observer(nullptr);
      EXPECT_EQ(dx.shape(), x.shape());
      EXPECT_EQ(log, (std::vector<std::string>{
                         "issued all_gather",      // the input shard, again
                         "weight_for_backward",    // dgrad GEMM
                         "issued reduce_scatter",  // dgrad's, left in flight
                         "weight_grad",            // wgrad GEMM, after waiting for the gather:
                         "wait_begin all_gather",
                         "wait_end all_gather",
                         "finalize_weight_grad",
                         "wait_begin reduce_scatter",
                         "wait_end reduce_scatter",
                     }));
    });
  }
}

// bf16: the weight is cast once per pass, or once per optimizer step when the
// passes allow reuse, and again when the parameter's version changes.
TEST(WeightSource, CastsOncePerStep) {
  Linear lin(ctx_of(nullptr, SequenceParallel::off, DType::bf16),
             {.name = "fc", .in = C, .out = C});
  auto& source = dynamic_cast<parallel::LocalShardSource&>(lin.source());
  Tensor x = input();
  auto pass = [&](bool reuse) {
    Ctx ctx;
    ctx.set_reuse_weight_casts(reuse);
    Tensor y = lin.forward(ctx, x);
    lin.backward(ctx, y);
  };
  pass(false);
  pass(false);
  EXPECT_EQ(source.casts(), 2);  // without reuse: every pass
  pass(true);
  pass(true);
  EXPECT_EQ(source.casts(), 2);  // the microbatches of one step reuse it
  lin.weight().value.fill(0.5f);
  ++lin.weight().version;  // what the optimizer does
  pass(true);
  EXPECT_EQ(source.casts(), 3);
  EXPECT_EQ(source.weight_for_backward(*std::make_unique<Ctx>()).item(0), 0.5f);
}

// Steady state: a Linear's forward and backward allocate their outputs (y and
// dx) and nothing else — gathers, re-gathers, partial sums and weight casts
// live in buffers reused across steps.
TEST(WeightSource, SteadyStateAllocatesOnlyTheOutputs) {
  for (DType dt : {DType::f32, DType::bf16}) {
    for (Parallel mode : {Parallel::column, Parallel::row}) {
      for (SequenceParallel sp : kAllSp) {
        SCOPED_TRACE(format("{} {} {}", dtype_name(dt), mode == Parallel::column ? "column" : "row",
                            sequence_parallel_name(sp)));
        comm::run_local(2, [&](comm::ProcessGroup& world) {
          comm::Grid grid(world, "tp-dp", {{"tp", 2}});
          auto tp = grid.group_ptr("tp");
          Linear lin(ctx_of(tp, sp, dt), {.name = "fc", .in = C, .out = 2 * C, .mode = mode});
          Tensor x = local_tokens(input(), sp, *tp);
          if (mode == Parallel::row)
            x = parallel::slice_along(exec_of(in_layout(input(), sp)), in_layout(input(), sp), -1,
                                      2, tp->rank());
          x = x.to(dt);
          auto pass = [&] {
            Ctx ctx;
            ctx.set_reuse_weight_casts(true);
            Tensor y = lin.forward(ctx, x);
            Tensor dy = y;  // same shape and dtype; read only
            return lin.backward(ctx, dy);
          };
          pass();
          pass();
          const int64_t before = MemoryTracker::current().device(Device::cpu()).allocations;
          pass();
          EXPECT_EQ(MemoryTracker::current().device(Device::cpu()).allocations - before, 2);
        });
      }
    }
  }
}

}  // namespace
}  // namespace weft::nn::testing
