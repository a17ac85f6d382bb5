// AdamW over a model's parameters: fp32 master weights, fp32 moments, weight
// decay only on parameters marked `decay` (2-D weights).
//
// The moments live in two flat buffers (one allocation each on the
// optimizer's device), every parameter's moment a view of its stretch, and a
// step updates every parameter in one multi-tensor kernel call
// (kernels::adamw_step_multi): the work is split across threads by elements,
// not by parameter. The parameters' values and gradients stay where their
// modules keep them (TP and GTP shards, experts that exist on some ranks
// only): the step reads them through the parameter list.
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
  // The same with the gradient scale read on the device from `grad_scale`
  // (f32, one element, where the moments are; kernels::clip_scale writes it):
  // a NaN there leaves parameters and moments as they are.
  void step(float lr, const Tensor& grad_scale);

  int64_t steps_taken() const { return step_; }
  void set_steps_taken(int64_t s) { step_ = s; }
  // First and second moments, in the order of the parameters (checkpoints):
  // views of the flat buffers, each of its parameter's shape. The step
  // updates the tensors these vectors hold: write through them (copy_from,
  // fill, zero) to keep the moments in the flat buffers.
  std::vector<Tensor>& first_moments() { return m_; }
  std::vector<Tensor>& second_moments() { return v_; }
  const std::vector<nn::Parameter*>& parameters() const { return params_; }

 private:
  // Each parameter's stretch of the flat buffers starts on a multiple of
  // kAlignment elements (64 bytes), in parameter order.
  static constexpr int64_t kAlignment = 16;

  std::vector<nn::Parameter*> params_;
  AdamWOptions options_;
  ExecContext ec_;
  Tensor m_flat_, v_flat_;
  std::vector<Tensor> m_, v_;
  std::vector<kernels::AdamWSegment> segments_;
  int64_t step_ = 0;

  void run(float lr, float grad_scale, const Tensor* scale_from);
};

}  // namespace weft::optim
