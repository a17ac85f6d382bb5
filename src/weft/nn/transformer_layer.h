// TransformerLayer: the pre-norm block of GPT-2 and Llama.
//
//   x (B, T, C) [SP: this rank's tokens]
//   h = x + dropout(attn(ln_1(x)))      MultiheadAttention with ln_1 fused in
//   y = h + dropout(mlp(ln_2(h)))       LayerNormMLP, or MoeMLP (moe_experts > 0)
//
// The residual stream keeps x's dtype; the sub-modules compute in the
// context's compute dtype (bf16: weights cast from the f32 masters once per
// step, norms and softmax in f32). The residual adds are where the stream is
// updated: the branch is converted to the stream's dtype there, and the
// stream's gradient to the compute dtype on the way back. Parameters, in Hugging Face GPT-2 order:
//   <name>.ln_1.{weight,bias}  <name>.attn.qkv.{weight,bias}  <name>.attn.proj.{weight,bias}
//   <name>.ln_2.{weight,bias}  <name>.mlp.fc1.{weight,bias}   <name>.mlp.fc2.{weight,bias}
//
// The residual adds are fused with the norm that reads their result (Norm's
// forward_add / backward_add, one pass over the rows; bitwise the unfused
// composition): h with ln_2 (a dense MLP; a MoE MLP runs its own norm), and
// y with the next layer's ln_1 or the final norm when the caller passes it to
// forward_stream (Gpt does); the layer's backward then runs ln_1's backward
// adding the stream's gradient. Residual dropout runs inside those passes.
//
// The partition plan says whether <name>.attn and <name>.mlp are partitioned
// (each as a whole; see partition.h). Residual dropout draws from the
// "default" stream without SP: every TP rank holds the same activations there
// and must draw the same mask. Under SP each rank holds different tokens, so
// the whole layer uses the "model-parallel" stream.
//
// Collectives per layer (TP > 1, attn and mlp partitioned):
//                       forward                            backward
//   no SP               2 all_reduce                       2 all_reduce
//   SP (seq or batch)   2 all_gather + 2 reduce_scatter    2 all_gather + 2 reduce_scatter
#pragma once

#include <memory>
#include <string>

#include "weft/nn/attention.h"
#include "weft/nn/layernorm_mlp.h"
#include "weft/nn/moe_mlp.h"
#include "weft/nn/partition.h"
#include "weft/nn/recompute.h"

namespace weft::nn {

struct TransformerLayerConfig {
  std::string name{};    // "h.3"
  int64_t width = 0;     // C
  int64_t heads = 0;     // H
  int64_t kv_heads = 0;  // key/value heads (grouped-query attention); 0: H
  // TP > kv_heads: the ranks sharing this rank's KV head (kv_share_group);
  // null: the attention builds it.
  std::shared_ptr<comm::ProcessGroup> kv_group{};
  int64_t hidden = 0;  // MLP hidden size; 0: 4·C
  int64_t layers = 1;  // layers of the model: residual projections get std/√(2·layers)
  float attention_dropout = 0.0f;  // on attention probabilities
  float hidden_dropout = 0.0f;     // on each residual branch
  NormKind norm = NormKind::layer;
  float eps = 1e-5f;
  MlpKind mlp = MlpKind::gelu;
  bool bias = true;     // biases of the Linear layers
  bool rotary = false;  // rotary positions inside attention
  double rope_theta = 10000.0;
  int64_t max_positions = 0;  // rotary: positions the table covers (the context length)
  float init_std = 0.02f;
  PartitionPlan plan{};  // which of <name>.attn and <name>.mlp are partitioned
  // Mixture of experts: the MLP is a MoeMLP of this many experts (0: dense),
  // with MoeMLPConfig's routing fields.
  int64_t moe_experts = 0;
  int64_t moe_top_k = 2;
  float moe_capacity_factor = 0.0f;
  float moe_aux_coef = 0.01f;
  float moe_z_coef = 0.0f;
  // Activation recomputation (recompute.h): selective in the attention,
  // full for the whole layer (not with MoE layers).
  Recompute recompute = Recompute::none;
};

class TransformerLayer : public Module {
 public:
  TransformerLayer(ContextPtr context, TransformerLayerConfig cfg);

  // x (B, T, C) -> y (B, T, C), both in x's dtype
  Tensor forward(Ctx& ctx, const Tensor& x) override;
  Tensor backward(Ctx& ctx, const Tensor& dy) override;

  // The residual stream between layers: x, and (when defined) normed =
  // input_norm()(x) in the compute dtype, run by the layer before.
  struct Stream {
    Tensor x, normed;
  };
  // in -> out; `next` (null: none) is the norm that reads this layer's output
  // (the next layer's input_norm(), or the model's final norm): it runs here,
  // fused with the last residual add, and out.normed is its output. backward
  // takes the whole gradient of out.x (the next norm's backward included).
  // With a cache (generation; forward only, no sequence parallelism),
  // attention reads and extends it (MultiheadAttention::forward_normed).
  Stream forward_stream(Ctx& ctx, const Stream& in, Norm* next, const KvCacheView* cache = nullptr);
  // The norm the layer before may run for this one (attention's input norm),
  // or null: then in.normed must be undefined.
  Norm* input_norm() { return attn_.input_norm(); }
  std::vector<Module*> children() override { return {&attn_, &mlp_module()}; }

  const TransformerLayerConfig& config() const { return cfg_; }
  const ParallelContext& context() const { return *pc_; }
  MultiheadAttention& attn() { return attn_; }
  // The dense MLP (an error in a MoE layer) and the MoE one (null in a dense layer).
  LayerNormMLP& mlp();
  MoeMLP* moe() { return moe_.get(); }

  // The residual dropout masks of the forward saved in ctx (u8, the shape of
  // x; undefined when no dropout ran): after attention and after the MLP.
  struct DropoutMasks {
    Tensor attn, mlp;
  };
  DropoutMasks dropout_masks(Ctx& ctx);

 private:
  struct Saved {
    Tensor attn_mask, mlp_mask;
    // Full recomputation: the layer's input and the random streams before
    // its forward (checkpointed: nothing else is saved).
    bool checkpointed = false;
    Tensor input;
    parallel::RngTracker::State rng;
  };
  // The layer's forward (forward_stream without full recomputation).
  Stream forward_layer(Ctx& ctx, const Stream& in, Norm* next, const KvCacheView* cache = nullptr);
  // Full recomputation in the backward: the forward again from the saved
  // input, with the streams as they were.
  void recompute(Ctx& ctx);
  // The residual dropout of `branch`: its draw from the RNG stream (under
  // context parallelism the whole sequences', rows keyed by true position),
  // p = 0 when none runs (no RNG, not training, or p = 0).
  kernels::ResidualDropout draw_dropout(Ctx& ctx, const Tensor& branch) const;
  // x + dropout(branch) in x's dtype, without a norm after it; mask set when
  // dropout ran.
  Tensor residual_add(Ctx& ctx, const Tensor& x, const Tensor& branch, Tensor& mask) const;
  // h = x + dropout(a), and the MLP on it: returns the MLP's output.
  Tensor mlp_forward(Ctx& ctx, const Tensor& x, const Tensor& a, Tensor& h, Saved& s);
  // dy (the gradient of h) -> the gradient of the attention branch; dh set.
  Tensor mlp_backward(Ctx& ctx, const Tensor& dy, const Saved& s, Tensor& dh);

  Module& mlp_module();

  ContextPtr pc_;
  TransformerLayerConfig cfg_;
  MultiheadAttention attn_;
  std::unique_ptr<LayerNormMLP> mlp_;  // exactly one of mlp_ and moe_
  std::unique_ptr<MoeMLP> moe_;
};

}  // namespace weft::nn
