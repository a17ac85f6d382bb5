#include "weft/nn/norm.h"

#include "weft/core/cuda.h"
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

void Norm::check_input(const Tensor& x) const {
  WEFT_CHECK(x.dim() >= 1 && x.shape().last() == cfg_.width,
             "{}: input of shape {} does not end in the normalized width {}", cfg_.name, x.shape(),
             cfg_.width);
}

void Norm::make_stats(Saved& s, const Tensor& x) const {
  const ExecContext& ec = pc_->exec;
  s.rstd = ec.empty({x.shape().rows()}, DType::f32, MemoryTag::activations);
  s.mean = kind_ == NormKind::layer
               ? ec.empty({x.shape().rows()}, DType::f32, MemoryTag::activations)
               : Tensor();
}

Tensor Norm::forward(Ctx& ctx, const Tensor& x) {
  const cuda::NvtxRange nvtx(name() + " forward");
  check_input(x);
  Saved& s = ctx.saved<Saved>(this);
  s.x = x;
  make_stats(s, x);
  Tensor y = pc_->exec.empty(x.shape(), x.dtype(), MemoryTag::activations);
  if (kind_ == NormKind::layer) {
    kernels::layer_norm_forward(pc_->exec, x, weight_.value, bias_.value, cfg_.eps, y, s.mean,
                                s.rstd);
  } else {
    kernels::rms_norm_forward(pc_->exec, x, weight_.value, cfg_.eps, y, s.rstd);
  }
  return y.to(pc_->compute());
}

Norm::AddOutputs Norm::forward_add(Ctx& ctx, const Tensor& x, const Tensor& branch,
                                   const kernels::ResidualDropout& dropout) {
  check_input(x);
  WEFT_CHECK(branch.shape() == x.shape(), "{}: residual branch of shape {} for a stream of {}",
             cfg_.name, branch.shape(), x.shape());
  const ExecContext& ec = pc_->exec;
  Saved& s = ctx.saved<Saved>(this);
  AddOutputs out;
  out.sum = ec.empty(x.shape(), x.dtype(), MemoryTag::activations);
  if (dropout.p > 0.0f) out.mask = ec.empty(x.shape(), DType::u8, MemoryTag::activations);
  s.x = out.sum;
  make_stats(s, x);
  Tensor y = ec.empty(x.shape(), x.dtype(), MemoryTag::activations);
  const Tensor b = branch.to(x.dtype());
  if (kind_ == NormKind::layer) {
    kernels::add_layer_norm_forward(ec, x, b, dropout, weight_.value, bias_.value, cfg_.eps,
                                    out.sum, y, s.mean, s.rstd, out.mask);
  } else {
    kernels::add_rms_norm_forward(ec, x, b, dropout, weight_.value, cfg_.eps, out.sum, y, s.rstd,
                                  out.mask);
  }
  out.y = y.to(pc_->compute());
  return out;
}

Tensor Norm::run_backward(Ctx& ctx, const Tensor& dy, const kernels::ResidualGrad& r) {
  Saved& s = ctx.saved<Saved>(this);
  WEFT_CHECK(s.x.defined(), "{}: backward without a forward in this context", cfg_.name);
  WEFT_CHECK(dy.shape() == s.x.shape(), "{}: gradient of shape {} for an output of shape {}",
             cfg_.name, dy.shape(), s.x.shape());
  Tensor g = dy.to(s.x.dtype());
  Tensor dx = pc_->exec.empty(s.x.shape(), s.x.dtype(), MemoryTag::activations);
  if (kind_ == NormKind::layer) {
    kernels::layer_norm_backward(pc_->exec, g, s.x, weight_.value, s.mean, s.rstd, dx, weight_.grad,
                                 bias_.grad, r);
  } else {
    kernels::rms_norm_backward(pc_->exec, g, s.x, weight_.value, s.rstd, dx, weight_.grad, r);
  }
  ctx.release(this);
  return dx;
}

Tensor Norm::backward(Ctx& ctx, const Tensor& dy) {
  const cuda::NvtxRange nvtx(name() + " backward");
  return run_backward(ctx, dy, {});
}

Norm::AddGrads Norm::backward_add(Ctx& ctx, const Tensor& dy, const Tensor& dres,
                                  const Tensor& mask, float p) {
  const Saved& s = ctx.saved<Saved>(this);
  WEFT_CHECK(s.x.defined(), "{}: backward without a forward in this context", cfg_.name);
  WEFT_CHECK(dres.shape() == s.x.shape(),
             "{}: residual gradient of shape {} for a stream of shape {}", cfg_.name, dres.shape(),
             s.x.shape());
  const Tensor res = dres.to(s.x.dtype());
  kernels::ResidualGrad r{.dres = &res};
  Tensor dbranch;
  if (mask.defined()) {
    dbranch = pc_->exec.empty(s.x.shape(), s.x.dtype(), MemoryTag::activations);
    r.mask = &mask;
    r.p = p;
    r.dbranch = &dbranch;
  }
  AddGrads out;
  out.dx = run_backward(ctx, dy, r);
  out.dbranch = (mask.defined() ? dbranch : out.dx).to(pc_->compute());
  return out;
}

}  // namespace weft::nn
