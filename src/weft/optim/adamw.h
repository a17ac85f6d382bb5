// AdamW over a model's parameters: fp32 master weights, fp32 moments, weight
// decay only on parameters marked `decay` (2-D weights).
#pragma once

#include <vector>

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"
#include "weft/kernels/optimizer.h"
#include "weft/nn/parameter.h"

namespace weft::optim {

struct AdamWOptions {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

class AdamW {
 public:
  // The moments are allocated on `ec`, and the steps run on it.
  AdamW(std::vector<nn::Parameter*> params, AdamWOptions options,
        const ExecContext& ec = ExecContext::host());

  // One update with learning rate `lr`; grad_scale multiplies every gradient
  // first (clipping). Advances the step counter.
  void step(float lr, float grad_scale = 1.0f);

  int64_t steps_taken() const { return step_; }
  void set_steps_taken(int64_t s) { step_ = s; }
  // First and second moments, in the order of the parameters (checkpoints).
  std::vector<Tensor>& first_moments() { return m_; }
  std::vector<Tensor>& second_moments() { return v_; }
  const std::vector<nn::Parameter*>& parameters() const { return params_; }

 private:
  std::vector<nn::Parameter*> params_;
  AdamWOptions options_;
  ExecContext ec_;
  std::vector<Tensor> m_, v_;
  int64_t step_ = 0;
};

}  // namespace weft::optim
