#include "weft/nn/layernorm_linear.h"

#include "weft/kernels/activation.h"

namespace weft::nn {

LayerNormLinearConfig LayerNormLinear::checked(LayerNormLinearConfig cfg) {
  WEFT_CHECK(cfg.mode != Parallel::row,
             "{}: LayerNormLinear is column-parallel only (a norm over the full width cannot "
             "feed features split over the TP group); use mode column or none, or a norm "
             "followed by a row-parallel Linear",
             cfg.name);
  WEFT_CHECK(!cfg.norm_name.empty() && cfg.norm_name != cfg.name,
             "{}: LayerNormLinear needs a norm_name of its own for the norm's parameters",
             cfg.name);
  return cfg;
}

LayerNormLinear::LayerNormLinear(ContextPtr context, LayerNormLinearConfig cfg)
    : Module(cfg.name),
      cfg_(checked(std::move(cfg))),
      norm_(cfg_.norm, context, {.name = cfg_.norm_name, .width = cfg_.in, .eps = cfg_.eps}),
      linear_(context, {.name = cfg_.name,
                        .in = cfg_.in,
                        .out = cfg_.out,
                        .mode = cfg_.mode,
                        .bias = cfg_.bias,
                        .gather_output = false,
                        .input_is_parallel = true,
                        .init_std = cfg_.init_std,
                        .groups = cfg_.groups,
                        .positions = cfg_.positions,
                        .dealt_groups = cfg_.dealt_groups,
                        .share_group = cfg_.share_group,
                        .overlap_name = cfg_.overlap_name}) {}

LayerNormLinear::Outputs LayerNormLinear::forward_both(Ctx& ctx, const Tensor& x) {
  Tensor n = norm_.forward(ctx, x);
  // The Linear runs the TP-boundary mapping (copy_to_tp, or gather_from_sp
  // under SP) on the normalized tokens, then the column GEMM.
  Tensor y = linear_.forward(ctx, n);
  return {y, cfg_.return_layernorm_output ? n : Tensor{}};
}

Tensor LayerNormLinear::backward_both(Ctx& ctx, const Tensor& dy, const Tensor& dnorm) {
  return norm_.backward(ctx, backward_normed(ctx, dy, dnorm));
}

Tensor LayerNormLinear::backward_normed(Ctx& ctx, const Tensor& dy, const Tensor& dnorm) {
  Tensor dn = linear_.backward(ctx, dy);
  if (dnorm.defined()) {
    WEFT_CHECK(cfg_.return_layernorm_output,
               "{}: a gradient for the norm output, which forward did not return "
               "(set return_layernorm_output)",
               cfg_.norm_name);
    WEFT_CHECK(dnorm.shape() == dn.shape(), "{}: norm-output gradient {} for a norm output {}",
               cfg_.norm_name, dnorm.shape(), dn.shape());
    Tensor sum = linear_.context().exec.empty(dn.shape(), dn.dtype(), MemoryTag::activations);
    kernels::add(linear_.context().exec, dn, dnorm, sum);
    dn = sum;
  }
  return dn;
}

}  // namespace weft::nn
