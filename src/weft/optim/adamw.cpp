#include "weft/optim/adamw.h"

namespace weft::optim {

AdamW::AdamW(std::vector<nn::Parameter*> params, AdamWOptions options, const ExecContext& ec)
    : params_(std::move(params)), options_(options), ec_(ec) {
  for (nn::Parameter* p : params_) {
    m_.push_back(ec_.zeros(p->value.shape(), DType::f32, MemoryTag::optimizer));
    v_.push_back(ec_.zeros(p->value.shape(), DType::f32, MemoryTag::optimizer));
  }
}

void AdamW::step(float lr, float grad_scale) {
  ++step_;
  for (size_t i = 0; i < params_.size(); ++i) {
    nn::Parameter& p = *params_[i];
    kernels::adamw_step(ec_, p.value, p.grad, m_[i], v_[i],
                        {.lr = lr,
                         .beta1 = options_.beta1,
                         .beta2 = options_.beta2,
                         .eps = options_.eps,
                         .weight_decay = p.decay ? options_.weight_decay : 0.0f,
                         .step = step_,
                         .grad_scale = grad_scale});
  }
}

}  // namespace weft::optim
