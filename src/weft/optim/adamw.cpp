#include "weft/optim/adamw.h"

namespace weft::optim {

AdamW::AdamW(std::vector<nn::Parameter*> params, AdamWOptions options, const ExecContext& ec)
    : params_(std::move(params)), options_(options), ec_(ec) {
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (const nn::Parameter* p : params_) {
    offsets.push_back(total);
    total += (p->value.numel() + kAlignment - 1) / kAlignment * kAlignment;
  }
  m_flat_ = ec_.zeros({total}, DType::f32, MemoryTag::optimizer);
  v_flat_ = ec_.zeros({total}, DType::f32, MemoryTag::optimizer);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Shape& shape = params_[i]->value.shape();
    m_.push_back(m_flat_.narrow(offsets[i], shape.numel()).reshape(shape));
    v_.push_back(v_flat_.narrow(offsets[i], shape.numel()).reshape(shape));
  }
}

void AdamW::step(float lr, float grad_scale) { run(lr, grad_scale, nullptr); }

void AdamW::step(float lr, const Tensor& grad_scale) { run(lr, 1.0f, &grad_scale); }

void AdamW::run(float lr, float grad_scale, const Tensor* scale_from) {
  ++step_;
  segments_.clear();
  for (size_t i = 0; i < params_.size(); ++i) {
    nn::Parameter& p = *params_[i];
    ++p.version;  // weight sources recast it
    segments_.push_back(
        {.params = &p.value, .grads = &p.grad, .m = &m_[i], .v = &v_[i], .decay = p.decay});
  }
  kernels::adamw_step_multi(ec_, segments_,
                            {.lr = lr,
                             .beta1 = options_.beta1,
                             .beta2 = options_.beta2,
                             .eps = options_.eps,
                             .weight_decay = options_.weight_decay,
                             .step = step_,
                             .grad_scale = grad_scale,
                             .grad_scale_from = scale_from});
}

}  // namespace weft::optim
