#include "weft/nn/norm.h"

#include "weft/kernels/norm.h"

namespace weft::nn {

const char* norm_kind_name(NormKind k) { return k == NormKind::layer ? "layernorm" : "rmsnorm"; }

Norm::Norm(NormKind kind, ContextPtr context, NormConfig cfg)
    : Module(cfg.name), kind_(kind), pc_(std::move(context)), cfg_(std::move(cfg)) {
  WEFT_CHECK(pc_ != nullptr, "{}: {} needs a parallel context", cfg_.name, norm_kind_name(kind_));
  WEFT_CHECK(cfg_.width > 0, "{}: {} needs a positive width, got {}", cfg_.name,
             norm_kind_name(kind_), cfg_.width);
  WEFT_CHECK(cfg_.eps > 0.0f, "{}: {} needs a positive eps, got {}", cfg_.name,
             norm_kind_name(kind_), cfg_.eps);
  weight_ = sharded_parameter(cfg_.name + ".weight", Tensor::full({cfg_.width}, 1.0f), 0, 0, 1, 1,
                              false, pc_->exec.device());
  if (kind_ == NormKind::layer) {
    bias_ = sharded_parameter(cfg_.name + ".bias", Tensor::zeros({cfg_.width}), 0, 0, 1, 1, false,
                              pc_->exec.device());
  }
  if (pc_->tp_size() > 1) {
    for (Parameter* p : own_parameters()) {
      p->spec.replicated_over = parallel::replicated_groups(true);
      if (pc_->sequence_parallel()) p->grad_sum_group = pc_->tp;
    }
  }
}

std::vector<Parameter*> Norm::own_parameters() {
  if (kind_ == NormKind::layer) return {&weight_, &bias_};
  return {&weight_};
}

Tensor Norm::forward(Ctx& ctx, const Tensor& x) {
  WEFT_CHECK(x.dim() >= 1 && x.shape().last() == cfg_.width,
             "{}: input of shape {} does not end in the normalized width {}", cfg_.name, x.shape(),
             cfg_.width);
  Saved& s = ctx.saved<Saved>(this);
  s.x = x;
  const ExecContext& ec = pc_->exec;
  s.rstd = ec.empty({x.shape().rows()}, DType::f32, MemoryTag::activations);
  Tensor y = ec.empty(x.shape(), x.dtype(), MemoryTag::activations);
  if (kind_ == NormKind::layer) {
    s.mean = ec.empty({x.shape().rows()}, DType::f32, MemoryTag::activations);
    kernels::layer_norm_forward(pc_->exec, x, weight_.value, bias_.value, cfg_.eps, y, s.mean,
                                s.rstd);
  } else {
    kernels::rms_norm_forward(pc_->exec, x, weight_.value, cfg_.eps, y, s.rstd);
  }
  return y.to(pc_->compute());
}

Tensor Norm::backward(Ctx& ctx, const Tensor& dy) {
  Saved& s = ctx.saved<Saved>(this);
  WEFT_CHECK(s.x.defined(), "{}: backward without a forward in this context", cfg_.name);
  WEFT_CHECK(dy.shape() == s.x.shape(), "{}: gradient of shape {} for an output of shape {}",
             cfg_.name, dy.shape(), s.x.shape());
  Tensor g = dy.to(s.x.dtype());
  Tensor dx = pc_->exec.empty(s.x.shape(), s.x.dtype(), MemoryTag::activations);
  if (kind_ == NormKind::layer) {
    kernels::layer_norm_backward(pc_->exec, g, s.x, weight_.value, s.mean, s.rstd, dx, weight_.grad,
                                 bias_.grad);
  } else {
    kernels::rms_norm_backward(pc_->exec, g, s.x, weight_.value, s.rstd, dx, weight_.grad);
  }
  ctx.release(this);
  return dx;
}

}  // namespace weft::nn
