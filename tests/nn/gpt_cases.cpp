// The whole model, GPT-2 and Llama (with 4, 2 and 1 KV heads: replicated
// over TP ranks beyond their count; and GPT-2 with replicated attention), at
// TP 2 and 4 with and without sequence parallelism equals TP=1: the loss, and
// every parameter's gradient through its ShardSpec. The MoE family is Llama
// with 4 experts, top-2, in every other layer, with the z-loss on.
#include <gtest/gtest.h>

#include "contexts.h"
#include "tp_cases.h"
#include "tp_harness.h"
#include "weft/comm/grid.h"
#include "weft/nn/gpt.h"

namespace weft::nn::testing {

Tensor random_tokens(const Shape& shape, int64_t vocab, uint32_t seed) {
  std::vector<int32_t> v(static_cast<size_t>(shape.numel()));
  uint32_t s = seed;
  for (auto& t : v) {
    s = s * 1664525u + 1013904223u;
    t = static_cast<int32_t>((s >> 8) % static_cast<uint32_t>(vocab));
  }
  return Tensor::from_i32(shape, v);
}

namespace {

GptConfig small_config() {
  GptConfig c;
  c.vocab = 61;
  c.seq = 8;
  c.layers = 2;
  c.width = 16;
  c.heads = 4;
  return c;
}

// Llama's architecture at a test size: 8 query heads of 4 over 4 KV heads (the
// head permutation matters), SwiGLU, rotary positions, no biases, untied head.
GptConfig llama_config() {
  GptConfig c = small_config();
  c.width = 32;
  c.heads = 8;
  c.kv_heads = 4;
  c.hidden = 24;
  c.norm = NormKind::rms;
  c.mlp = MlpKind::swiglu;
  c.positions = PositionKind::rotary;
  c.rope_theta = 500000.0;
  c.bias = false;
  c.tied_head = false;
  return c;
}

// The Llama with fewer key/value heads than TP ranks at TP 4 (2 heads) or
// at TP 2 and 4 (1 head): each KV head replicated on TP/kv_heads ranks.
GptConfig llama_kv_config(int64_t kv_heads) {
  GptConfig c = llama_config();
  c.kv_heads = kv_heads;
  return c;
}

// GPT-2's blocks (biases: the qkv bias is shared like the weight's rows)
// over one KV head.
GptConfig gpt_kv1_config() {
  GptConfig c = small_config();
  c.kv_heads = 1;
  return c;
}

// Replicated attention: under sequence SP it gathers its input before its
// norm, so the layer before cannot run that norm (no fusion across layers).
GptConfig replicated_attention_config() {
  GptConfig c = small_config();
  c.plan = PartitionPlan::parse("h.*.attn=replicate");
  return c;
}

GptConfig moe_config() {
  GptConfig c = llama_config();
  c.layers = 3;
  c.moe_experts = 4;
  c.moe_every = 2;
  c.moe_z_coef = 0.001f;
  return c;
}

void check_model(comm::ProcessGroup& world, int tp_size, SequenceParallel sp,
                 const GptConfig& cfg) {
  comm::Grid grid(world, "tp-dp", {{"tp", tp_size}});
  auto tp = grid.group_ptr("tp");
  const int64_t B = 4, T = 8;
  Tensor tokens = random_tokens({B, T}, 61, 1), targets = random_tokens({B, T}, 61, 2);

  Gpt ref(host_ctx_of(nullptr, SequenceParallel::off, DType::f32, 5), cfg);
  Ctx rctx;
  float ref_loss = ref.forward_loss(rctx, tokens, targets);
  const float ref_aux = ref.aux_loss(rctx);
  ref.backward_loss(rctx);

  Gpt model(ctx_of(tp, sp, DType::f32, 5), cfg);
  Ctx ctx;
  // Batch SP: each rank passes its own samples.
  const bool own = sp == SequenceParallel::batch;
  Tensor my_tokens = on_test_device(
      own ? parallel::slice_along(exec_of(tokens), tokens, 0, tp->size(), tp->rank()) : tokens);
  Tensor my_targets = on_test_device(
      own ? parallel::slice_along(exec_of(targets), targets, 0, tp->size(), tp->rank()) : targets);
  float loss = model.forward_loss(ctx, my_tokens, my_targets);
  EXPECT_NEAR(loss, ref_loss, 1e-5 * std::abs(ref_loss));
  EXPECT_NEAR(model.aux_loss(ctx), ref_aux, 1e-6);
  std::vector<Parameter*> seen;
  model.backward_loss(ctx, 1.0f, [&](const std::vector<Parameter*>& ps) {
    seen.insert(seen.end(), ps.begin(), ps.end());
  });
  EXPECT_EQ(seen.size(), model.parameters().size());
  expect_same_parameters(model, ref);
}

}  // namespace

std::vector<TpCase> gpt_cases() {
  const std::pair<const char*, GptConfig> families[] = {
      {"gpt", small_config()},
      {"llama", llama_config()},
      {"llama_kv2", llama_kv_config(2)},
      {"llama_kv1", llama_kv_config(1)},
      {"gpt_kv1", gpt_kv1_config()},
      {"gpt_attention_replicated", replicated_attention_config()}};
  const std::pair<const char*, SequenceParallel> layouts[] = {
      {"", SequenceParallel::off},
      {"_sp_seq", SequenceParallel::seq},
      {"_sp_batch", SequenceParallel::batch}};
  std::vector<TpCase> cases;
  for (const auto& [suffix, sp] : layouts) {
    cases.push_back({std::string("moe") + suffix,
                     [sp](comm::ProcessGroup& w, int t) { check_model(w, t, sp, moe_config()); }});
  }
  for (const auto& [family, cfg] : families) {
    for (const auto& [suffix, sp] : layouts) {
      cases.push_back({std::string(family) + suffix,
                       [cfg, sp](comm::ProcessGroup& w, int t) { check_model(w, t, sp, cfg); }});
    }
  }
  return cases;
}

}  // namespace weft::nn::testing
