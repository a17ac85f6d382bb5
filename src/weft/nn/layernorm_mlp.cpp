#include "weft/nn/layernorm_mlp.h"

#include "weft/kernels/activation.h"

namespace weft::nn {

LayerNormMLPConfig LayerNormMLP::checked(LayerNormMLPConfig cfg) {
  WEFT_CHECK(cfg.width > 0, "{}: LayerNormMLP needs a positive width, got {}", cfg.name, cfg.width);
  if (cfg.hidden == 0) cfg.hidden = 4 * cfg.width;
  WEFT_CHECK(cfg.hidden > 0, "{}: LayerNormMLP needs a positive hidden size, got {}", cfg.name,
             cfg.hidden);
  WEFT_CHECK(cfg.layers >= 1, "{}: layers (for the fc2 init scale) must be >= 1, got {}", cfg.name,
             cfg.layers);
  return cfg;
}

LayerNormMLP::LayerNormMLP(ContextPtr context, LayerNormMLPConfig cfg)
    : Module(cfg.name),
      pc_(std::move(context)),
      cfg_(checked(std::move(cfg))),
      fc1_(pc_, {.name = cfg_.name + ".fc1",
                 .norm_name = cfg_.norm_name,
                 .in = cfg_.width,
                 .out = cfg_.hidden,
                 .mode = cfg_.partition == Partition::tensor ? Parallel::column : Parallel::none,
                 .bias = true,
                 .norm = cfg_.norm,
                 .eps = cfg_.eps,
                 .init_std = cfg_.init_std,
                 .out_groups = 1,
                 .return_layernorm_output = false,
                 .overlap_name = "fc1"}),
      fc2_(pc_, residual_projection(cfg_.partition == Partition::tensor, cfg_.name + ".fc2",
                                    cfg_.hidden, cfg_.width, cfg_.init_std, cfg_.layers, "fc2")) {}

Tensor LayerNormMLP::forward(Ctx& ctx, const Tensor& x) {
  Saved& s = ctx.saved<Saved>(this);
  s.h = fc1_.forward(ctx, x);
  Tensor a = pc_->exec.empty(s.h.shape(), s.h.dtype(), MemoryTag::activations);
  kernels::gelu_forward(pc_->exec, s.h, a);
  return fc2_.forward(ctx, a);
}

Tensor LayerNormMLP::backward(Ctx& ctx, const Tensor& dy) {
  Saved& s = ctx.saved<Saved>(this);
  WEFT_CHECK(s.h.defined(), "{}: backward without a forward in this context", cfg_.name);
  Tensor h = s.h;
  ctx.release(this);
  Tensor da = fc2_.backward(ctx, dy);
  Tensor dh = pc_->exec.empty(h.shape(), h.dtype(), MemoryTag::activations);
  kernels::gelu_backward(pc_->exec, da, h, dh);
  return fc1_.backward(ctx, dh);
}

}  // namespace weft::nn
