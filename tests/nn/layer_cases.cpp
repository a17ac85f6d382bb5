// TP-equivalence cases of the transformer modules: LayerNorm, RMSNorm,
// LayerNormLinear, LayerNormMLP, MultiheadAttention, TransformerLayer (and a
// stack of two), partitioned and replicated, for every sequence-parallel
// mode. Each runs the module at the case's TP size and at TP=1 and compares
// outputs, input gradients and every parameter gradient. Dropout is 0 here:
// with dropout the TP ranks draw from different streams by design.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "contexts.h"
#include "testing.h"
#include "tp_cases.h"
#include "tp_harness.h"
#include "weft/comm/grid.h"
#include "weft/nn/attention.h"
#include "weft/nn/layernorm_linear.h"
#include "weft/nn/layernorm_mlp.h"
#include "weft/nn/norm.h"
#include "weft/nn/partition.h"
#include "weft/nn/transformer_layer.h"
#include "weft/parallel/mappings.h"

namespace weft::nn::testing {

namespace {

using weft::testing::Tolerance;

constexpr int64_t B = 4, T = 8, C = 16, H = 4;
// Larger than GPT-2's 0.02 so that attention is far from uniform and every
// gradient is O(1): small weights would let wrong gradients pass the
// tolerance.
constexpr float kStd = 0.3f;

double max_abs(const Tensor& t) {
  double m = 0;
  for (float v : t.to_vector()) m = std::max(m, static_cast<double>(std::abs(v)));
  return m;
}

// f32: docs/design.md's tolerance against values of order one. bf16: relative to
// the largest magnitude of the tensor (rounding of partial sums differs).
::testing::AssertionResult near(const Tensor& expected, const Tensor& actual, bool bf16) {
  return bf16 ? close(expected, actual, kBF16, max_abs(expected))
              : close(expected, actual, kF32, 1.0);
}

void expect_parameters(Module& mine, Module& ref, bool bf16) {
  if (!bf16) return expect_same_parameters(mine, ref);
  std::vector<Parameter*> a = mine.parameters(), b = ref.parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a[i]->name);
    EXPECT_EQ(a[i]->value.to_vector(), shard_of(a[i]->spec, b[i]->value).to_vector());
    Tensor g = a[i]->grad;
    if (a[i]->grad_sum_group) g = parallel::all_reduce_sum(exec_of(g), *a[i]->grad_sum_group, g);
    EXPECT_TRUE(near(shard_of(a[i]->spec, b[i]->grad), g, true));
  }
}

// A module over (B, T, C) token activations whose input and output both lie
// outside the TP region: this rank's tokens under SP, all of them otherwise.
// The module runs on a context with the TP group and `sp`; the reference on
// one without either (same seed and precision).
template <typename M, typename Cfg>
void check_tokens(comm::ProcessGroup& world, int tp_size, Cfg cfg, uint64_t seed,
                  SequenceParallel sp, bool bf16 = false,
                  const parallel::OverlapConfig& overlap = {}) {
  const DType compute = bf16 ? DType::bf16 : DType::f32;
  comm::Grid grid(world, "tp-dp", {{"tp", tp_size}});
  auto tp = grid.group_ptr("tp");
  Tensor x = random_tensor({B, T, C}, 11);
  Tensor dy = random_tensor({B, T, C}, 12);

  M ref(host_ctx_of(nullptr, SequenceParallel::off, compute, seed), cfg);
  Ctx rctx;
  Tensor y_ref = ref.forward(rctx, x);
  Tensor dx_ref = ref.backward(rctx, dy);

  M mod(ctx_of(tp, sp, compute, seed, overlap), cfg);
  Ctx ctx;
  Tensor y = mod.forward(ctx, local_tokens(x, sp, *tp));
  EXPECT_TRUE(near(local_tokens(y_ref, sp, *tp), y, bf16));
  Tensor dx = mod.backward(ctx, local_tokens(dy, sp, *tp));
  EXPECT_TRUE(near(local_tokens(dx_ref, sp, *tp), dx, bf16));
  expect_parameters(mod, ref, bf16);
}

// Two layers, h.0 and h.1, as the GPT model chains them.
class LayerStack : public Module {
 public:
  LayerStack(parallel::ContextPtr context, TransformerLayerConfig cfg) : Module("h") {
    cfg.layers = 2;
    cfg.name = "h.0";
    first_ = std::make_unique<TransformerLayer>(context, cfg);
    cfg.name = "h.1";
    second_ = std::make_unique<TransformerLayer>(context, cfg);
  }
  Tensor forward(Ctx& ctx, const Tensor& x) override {
    return second_->forward(ctx, first_->forward(ctx, x));
  }
  Tensor backward(Ctx& ctx, const Tensor& dy) override {
    return first_->backward(ctx, second_->backward(ctx, dy));
  }
  std::vector<Module*> children() override { return {first_.get(), second_.get()}; }

 private:
  std::unique_ptr<TransformerLayer> first_, second_;
};

// The column-parallel shard of a (B, T, out) activation of `groups` output
// groups: this rank's part of every group, as a column-parallel Linear lays
// out its output.
Tensor column_shard(const Tensor& full, int64_t groups, comm::ProcessGroup& tp) {
  const int64_t out = full.size(2);
  Tensor grouped = full.reshape({full.size(0) * full.size(1), groups, out / groups});
  Tensor mine = parallel::slice_along(exec_of(grouped), grouped, -1, tp.size(), tp.rank());
  return mine.reshape({full.size(0), full.size(1), out / tp.size()});
}

// LayerNormLinear, with the norm output returned and given a gradient too.
void check_layernorm_linear(comm::ProcessGroup& world, int tp_size, Parallel mode, NormKind norm,
                            int64_t groups, SequenceParallel sp) {
  comm::Grid grid(world, "tp-dp", {{"tp", tp_size}});
  auto tp = grid.group_ptr("tp");
  const int64_t out = 3 * C;
  LayerNormLinearConfig cfg{.name = "h.0.attn.qkv",
                            .norm_name = "h.0.ln_1",
                            .in = C,
                            .out = out,
                            .mode = mode,
                            .norm = norm,
                            .init_std = kStd,
                            .groups = groups,
                            .return_layernorm_output = true};
  Tensor x = random_tensor({B, T, C}, 21);
  Tensor dy = random_tensor({B, T, out}, 22);
  Tensor dn = random_tensor({B, T, C}, 23);

  LayerNormLinear ref(host_ctx_of(nullptr, SequenceParallel::off, DType::f32, 3), cfg);
  Ctx rctx;
  LayerNormLinear::Outputs r = ref.forward_both(rctx, x);
  Tensor dx_ref = ref.backward_both(rctx, dy, dn);

  LayerNormLinear mod(ctx_of(tp, sp, DType::f32, 3), cfg);
  Ctx ctx;
  const bool split = mode == Parallel::column;
  // Partitioned: every token (gathered under SP), this rank's features.
  // Replicated: this rank's tokens, every feature.
  auto out_layout = [&](const Tensor& full) {
    return split ? column_shard(in_layout(full, sp), groups, *tp) : local_tokens(full, sp, *tp);
  };
  LayerNormLinear::Outputs o = mod.forward_both(ctx, local_tokens(x, sp, *tp));
  EXPECT_TRUE(near(out_layout(r.y), o.y, false));
  EXPECT_TRUE(near(local_tokens(r.norm, sp, *tp), o.norm, false));
  Tensor dx = mod.backward_both(ctx, out_layout(dy), local_tokens(dn, sp, *tp));
  EXPECT_TRUE(near(local_tokens(dx_ref, sp, *tp), dx, false));
  expect_same_parameters(mod, ref);
}

// A layer built at TP=1, given weights that are not its initialization (as if
// loaded from a checkpoint), then re-sharded with set_tensor_parallel_group.
void check_resharded(comm::ProcessGroup& world, int tp_size, SequenceParallel sp) {
  comm::Grid grid(world, "tp-dp", {{"tp", tp_size}});
  auto tp = grid.group_ptr("tp");
  TransformerLayerConfig cfg{.name = "h.0", .width = C, .heads = H, .init_std = kStd};
  auto load_weights = [](Module& m) {
    uint32_t seed = 100;
    for (Parameter* p : m.parameters())
      p->value.copy_from(random_tensor(p->value.shape(), ++seed, -0.4f, 0.4f));
  };
  Tensor x = random_tensor({B, T, C}, 31), dy = random_tensor({B, T, C}, 32);
  TransformerLayer ref(host_ctx_of(nullptr, SequenceParallel::off), cfg);
  load_weights(ref);
  Ctx rctx;
  Tensor y_ref = ref.forward(rctx, x), dx_ref = ref.backward(rctx, dy);

  auto m = std::make_unique<TransformerLayer>(ctx_of(nullptr, sp), cfg);
  load_weights(*m);
  set_tensor_parallel_group(m, ctx_of(tp, sp));
  EXPECT_EQ(m->context().tp, tp);
  Ctx ctx;
  EXPECT_TRUE(near(local_tokens(y_ref, sp, *tp), m->forward(ctx, local_tokens(x, sp, *tp)), false));
  EXPECT_TRUE(
      near(local_tokens(dx_ref, sp, *tp), m->backward(ctx, local_tokens(dy, sp, *tp)), false));
  expect_same_parameters(*m, ref);
}

NormConfig norm_config() { return {.name = "h.0.ln_1", .width = C}; }

LayerNormMLPConfig mlp_config(Partition p) {
  return {.name = "h.0.mlp",
          .norm_name = "h.0.ln_2",
          .width = C,
          .partition = p,
          .init_std = kStd,
          .layers = 2};
}

MultiheadAttentionConfig attention_config(Partition p, bool input_norm) {
  return {.name = "h.0.attn",
          .input_norm = input_norm ? "h.0.ln_1" : "",
          .width = C,
          .heads = H,
          .partition = p,
          .init_std = kStd,
          .layers = 2};
}

// Built with seed 9.
TransformerLayerConfig layer_config(const std::string& plan, NormKind norm = NormKind::layer) {
  return {.name = "h.0",
          .width = C,
          .heads = H,
          .layers = 2,
          .norm = norm,
          .init_std = kStd,
          .plan = PartitionPlan::parse(plan)};
}

}  // namespace

std::vector<TpCase> layer_cases() {
  std::vector<TpCase> cases;
  const std::pair<const char*, SequenceParallel> sps[] = {{"", SequenceParallel::off},
                                                          {"_sp_seq", SequenceParallel::seq},
                                                          {"_sp_batch", SequenceParallel::batch}};
  using Check = std::function<void(comm::ProcessGroup&, int, SequenceParallel)>;
  const std::pair<const char*, Check> checks[] = {
      {"layernorm",
       [](auto& w, int t, auto sp) { check_tokens<LayerNorm>(w, t, norm_config(), 0, sp); }},
      {"rmsnorm",
       [](auto& w, int t, auto sp) { check_tokens<RMSNorm>(w, t, norm_config(), 0, sp); }},
      {"layernorm_linear_qkv",
       [](auto& w, int t, auto sp) {
         check_layernorm_linear(w, t, Parallel::column, NormKind::layer, 3, sp);
       }},
      {"rmsnorm_linear",
       [](auto& w, int t, auto sp) {
         check_layernorm_linear(w, t, Parallel::column, NormKind::rms, 1, sp);
       }},
      {"layernorm_linear_replicated",
       [](auto& w, int t, auto sp) {
         check_layernorm_linear(w, t, Parallel::none, NormKind::layer, 3, sp);
       }},
      {"layernorm_mlp",
       [](auto& w, int t, auto sp) {
         check_tokens<LayerNormMLP>(w, t, mlp_config(Partition::tensor), 5, sp);
       }},
      {"layernorm_mlp_replicated",
       [](auto& w, int t, auto sp) {
         check_tokens<LayerNormMLP>(w, t, mlp_config(Partition::replicate), 5, sp);
       }},
      {"attention",
       [](auto& w, int t, auto sp) {
         check_tokens<MultiheadAttention>(w, t, attention_config(Partition::tensor, false), 6, sp);
       }},
      {"attention_input_norm",
       [](auto& w, int t, auto sp) {
         check_tokens<MultiheadAttention>(w, t, attention_config(Partition::tensor, true), 6, sp);
       }},
      {"attention_replicated",
       [](auto& w, int t, auto sp) {
         check_tokens<MultiheadAttention>(w, t, attention_config(Partition::replicate, true), 6,
                                          sp);
       }},
      {"transformer_layer",
       [](auto& w, int t, auto sp) {
         check_tokens<TransformerLayer>(w, t, layer_config(""), 9, sp);
       }},
      {"transformer_layer_rmsnorm",
       [](auto& w, int t, auto sp) {
         check_tokens<TransformerLayer>(w, t, layer_config("", NormKind::rms), 9, sp);
       }},
      {"transformer_layer_mlp_replicated",
       [](auto& w, int t, auto sp) {
         check_tokens<TransformerLayer>(w, t, layer_config("h.*.mlp=replicate"), 9, sp);
       }},
      {"transformer_layer_replicated",
       [](auto& w, int t, auto sp) {
         check_tokens<TransformerLayer>(w, t, layer_config("*=replicate"), 9, sp);
       }},
      {"transformer_layer_bf16",
       [](auto& w, int t, auto sp) {
         check_tokens<TransformerLayer>(w, t, layer_config("", NormKind::layer), 9, sp, true);
       }},
      {"transformer_layer_resharded", check_resharded},
      {"transformer_stack",
       [](auto& w, int t, auto sp) { check_tokens<LayerStack>(w, t, layer_config(""), 9, sp); }},
      // Comm-GEMM overlap on (Transformer Engine's defaults; without SP the
      // ring falls back and the pipeline splits the all-reduce), and every
      // pipeline at 3 splits, which divides no block of these shapes evenly.
      {"transformer_layer_overlap",
       [](auto& w, int t, auto sp) {
         check_tokens<TransformerLayer>(w, t, layer_config(""), 9, sp, false,
                                        parallel::OverlapConfig::parse("on"));
       }},
      {"transformer_layer_overlap_pipeline3_bf16",
       [](auto& w, int t, auto sp) {
         check_tokens<TransformerLayer>(
             w, t, layer_config(""), 9, sp, true,
             parallel::OverlapConfig::parse("qkv_fprop=pipeline:3,fc1_fprop=pipeline:3,"
                                            "proj_fprop=pipeline:3,fc2_fprop=pipeline:3,"
                                            "qkv_dgrad=pipeline:3,fc1_dgrad=pipeline:3,"
                                            "qkv_wgrad=off,fc1_wgrad=off"));
       }},
      {"transformer_stack_overlap",
       [](auto& w, int t, auto sp) {
         check_tokens<LayerStack>(w, t, layer_config(""), 9, sp, false,
                                  parallel::OverlapConfig::parse("on"));
       }},
  };
  for (const auto& [sp_name, sp] : sps) {
    for (const auto& [name, check] : checks) {
      cases.push_back({std::string(name) + sp_name,
                       [check, sp](comm::ProcessGroup& w, int t) { check(w, t, sp); }});
    }
  }
  return cases;
}

}  // namespace weft::nn::testing
