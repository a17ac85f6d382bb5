#include "weft/nn/transformer_layer.h"

#include "weft/kernels/activation.h"
#include "weft/kernels/random.h"

namespace weft::nn {

namespace {

// a + b in a's dtype (b converted): the residual-stream update.
Tensor residual_add(const ExecContext& ec, const Tensor& a, const Tensor& b) {
  Tensor out = ec.empty(a.shape(), a.dtype(), MemoryTag::activations);
  kernels::add(ec, a, b.to(a.dtype()), out);
  return out;
}

}  // namespace

TransformerLayer::TransformerLayer(ContextPtr context, TransformerLayerConfig cfg)
    : Module(cfg.name),
      pc_(std::move(context)),
      cfg_(std::move(cfg)),
      attn_(pc_, {.name = cfg_.name + ".attn",
                  .input_norm = cfg_.name + ".ln_1",
                  .width = cfg_.width,
                  .heads = cfg_.heads,
                  .kv_heads = cfg_.kv_heads,
                  .kv_group = cfg_.kv_group,
                  .dropout = cfg_.attention_dropout,
                  .norm = cfg_.norm,
                  .eps = cfg_.eps,
                  .bias = cfg_.bias,
                  .rotary = cfg_.rotary,
                  .rope_theta = cfg_.rope_theta,
                  .max_positions = cfg_.max_positions,
                  .partition = cfg_.plan.lookup_together(cfg_.name + ".attn", {"qkv", "proj"}),
                  .init_std = cfg_.init_std,
                  .layers = cfg_.layers}) {
  const Partition mlp_partition = cfg_.plan.lookup_together(cfg_.name + ".mlp", {"fc1", "fc2"});
  if (cfg_.moe_experts > 0) {
    moe_ = std::make_unique<MoeMLP>(pc_, MoeMLPConfig{.name = cfg_.name + ".mlp",
                                                      .norm_name = cfg_.name + ".ln_2",
                                                      .width = cfg_.width,
                                                      .hidden = cfg_.hidden,
                                                      .norm = cfg_.norm,
                                                      .eps = cfg_.eps,
                                                      .activation = cfg_.mlp,
                                                      .partition = mlp_partition,
                                                      .init_std = cfg_.init_std,
                                                      .layers = cfg_.layers,
                                                      .experts = cfg_.moe_experts,
                                                      .top_k = cfg_.moe_top_k,
                                                      .capacity_factor = cfg_.moe_capacity_factor,
                                                      .aux_coef = cfg_.moe_aux_coef,
                                                      .z_coef = cfg_.moe_z_coef});
  } else {
    mlp_ = std::make_unique<LayerNormMLP>(pc_, LayerNormMLPConfig{.name = cfg_.name + ".mlp",
                                                                  .norm_name = cfg_.name + ".ln_2",
                                                                  .width = cfg_.width,
                                                                  .hidden = cfg_.hidden,
                                                                  .norm = cfg_.norm,
                                                                  .eps = cfg_.eps,
                                                                  .activation = cfg_.mlp,
                                                                  .bias = cfg_.bias,
                                                                  .partition = mlp_partition,
                                                                  .init_std = cfg_.init_std,
                                                                  .layers = cfg_.layers});
  }
  WEFT_CHECK(cfg_.hidden_dropout >= 0.0f && cfg_.hidden_dropout < 1.0f,
             "{}: hidden dropout must lie in [0, 1), got {}", cfg_.name, cfg_.hidden_dropout);
}

Tensor TransformerLayer::residual_dropout(Ctx& ctx, const Tensor& branch, Tensor& mask) const {
  parallel::RngTracker* rng = ctx.rng();
  if (!rng || !ctx.training() || cfg_.hidden_dropout == 0.0f) {
    mask = {};
    return branch;
  }
  // Without SP the TP ranks hold the same activations and must agree; under
  // SP each holds its own tokens.
  auto scope = rng->fork(pc_->sequence_parallel() ? parallel::kModelParallelStream
                                                  : parallel::kDefaultStream);
  parallel::RngTracker::Stream draw = rng->take(static_cast<uint64_t>(branch.numel()));
  const ExecContext& ec = pc_->exec;
  Tensor y = ec.empty(branch.shape(), branch.dtype(), MemoryTag::activations);
  mask = ec.empty(branch.shape(), DType::u8, MemoryTag::activations);
  kernels::dropout_forward(pc_->exec, branch, cfg_.hidden_dropout, draw.seed, draw.offset, y, mask);
  return y;
}

Tensor TransformerLayer::residual_dropout_backward(const Tensor& dy, const Tensor& mask) const {
  if (!mask.defined()) return dy.to(pc_->compute());
  Tensor dx = pc_->exec.empty(dy.shape(), dy.dtype(), MemoryTag::activations);
  kernels::dropout_backward(pc_->exec, dy, mask, cfg_.hidden_dropout, dx);
  return dx.to(pc_->compute());
}

Tensor TransformerLayer::forward(Ctx& ctx, const Tensor& x) {
  Saved& s = ctx.saved<Saved>(this);
  const ExecContext& ec = pc_->exec;
  Tensor h = residual_add(ec, x, residual_dropout(ctx, attn_.forward(ctx, x), s.attn_mask));
  return residual_add(ec, h, residual_dropout(ctx, mlp_module().forward(ctx, h), s.mlp_mask));
}

Tensor TransformerLayer::backward(Ctx& ctx, const Tensor& dy) {
  Saved& s = ctx.saved<Saved>(this);
  Tensor attn_mask = s.attn_mask, mlp_mask = s.mlp_mask;
  ctx.release(this);
  // y = h + drop(mlp(h)):  dh = dy + mlp'(drop'(dy))
  const ExecContext& ec = pc_->exec;
  Tensor dh =
      residual_add(ec, dy, mlp_module().backward(ctx, residual_dropout_backward(dy, mlp_mask)));
  // h = x + drop(attn(x)): dx = dh + attn'(drop'(dh))
  return residual_add(ec, dh, attn_.backward(ctx, residual_dropout_backward(dh, attn_mask)));
}

Module& TransformerLayer::mlp_module() {
  if (moe_) return *moe_;
  return *mlp_;
}

LayerNormMLP& TransformerLayer::mlp() {
  WEFT_CHECK(mlp_ != nullptr, "{}: a MoE layer has no dense MLP (moe())", cfg_.name);
  return *mlp_;
}

TransformerLayer::DropoutMasks TransformerLayer::dropout_masks(Ctx& ctx) {
  Saved& s = ctx.saved<Saved>(this);
  return {s.attn_mask, s.mlp_mask};
}

}  // namespace weft::nn
