// AdamW on fp32 master weights, and the squared norm of a gradient for
// global gradient-norm clipping; each over one tensor or over a list of
// tensors in one threaded pass (the multi-tensor forms, which the optimizer
// and the gradient norm use: the work is split across threads by elements,
// so many small parameters run as fast as one large one).
//
// All are bitwise the same for any thread count and any grouping into lists:
// AdamW is element-wise, and a sum of squares reduces fixed blocks of its
// tensor whose partial sums are added in block order, however many threads
// computed them. A multi-tensor call gives each tensor exactly the result of
// the single-tensor call.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::kernels {

// torch.optim.AdamW: weight decay is decoupled from the gradient (applied to
// the weight, scaled by lr), and the moments are bias-corrected by step.
struct AdamWConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  // 1-based number of this step, for the bias corrections 1 - beta^step.
  int64_t step = 1;
  // Multiplies the gradient before anything else: gradient clipping
  // (max_norm / norm) folded into the step, without rewriting the gradient.
  float grad_scale = 1.0f;
  // When set (f32, one element, on the step's device): the grad_scale read
  // from the device in place of the one above, so that a clipping factor
  // computed on the device (clip_scale in kernels/step_scalars.h) reaches the
  // step without a host read. A NaN there skips the step: nothing is
  // written, parameters and moments keep their values (a non-finite loss or
  // gradient norm stops training before the update).
  const Tensor* grad_scale_from = nullptr;
};

// params, grads, m, v: f32, the same number of elements (any shape); updated in place:
//   g = grad_scale · grad
//   p -= lr · weight_decay · p
//   m  = beta1 · m + (1 - beta1) · g
//   v  = beta2 · v + (1 - beta2) · g²
//   p -= lr · (m / (1 - beta1^step)) / (sqrt(v / (1 - beta2^step)) + eps)
void adamw_step(const ExecContext& ec, Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                const AdamWConfig& cfg);

// One tensor of a multi-tensor AdamW step: a parameter's value, its gradient
// and its two moments (f32, the same number of elements, any shapes), and
// whether weight decay applies to it.
struct AdamWSegment {
  Tensor* params = nullptr;
  const Tensor* grads = nullptr;
  Tensor* m = nullptr;
  Tensor* v = nullptr;
  bool decay = false;
};

// adamw_step over every segment in one threaded pass, cfg.weight_decay applied
// to the segments marked `decay` (0 to the others): each element is updated
// bit for bit as adamw_step updates it.
void adamw_step_multi(const ExecContext& ec, std::span<const AdamWSegment> segments,
                      const AdamWConfig& cfg);

// x (any shape) f32 -> Σ x², each square and sum in f64.
double sum_of_squares(const ExecContext& ec, const Tensor& x);

// xs: f32 tensors (any shapes) -> Σ x² of each, in their order, in one
// threaded pass; element i is bit for bit sum_of_squares(ec, xs[i]).
std::vector<double> sum_of_squares_multi(const ExecContext& ec, std::span<const Tensor> xs);
// xs -> total (f64, one element, on ec's device) = the elements of
// sum_of_squares_multi(xs) added in their order to 0, bit for bit, computed
// where the tensors are: on a GPU nothing returns to the host.
void sum_of_squares_total(const ExecContext& ec, std::span<const Tensor> xs, Tensor& total);

}  // namespace weft::kernels
