// AdamW on fp32 master weights, and the squared norm of a gradient for
// global gradient-norm clipping.
//
// Both are bitwise the same for any thread count: adamw_step is element-wise,
// and sum_of_squares reduces fixed blocks whose partial sums are added in
// block order, however many threads computed them.
#pragma once

#include <cstdint>

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
};

// params, grads, m, v: f32, the same number of elements (any shape); updated in place:
//   g = grad_scale · grad
//   p -= lr · weight_decay · p
//   m  = beta1 · m + (1 - beta1) · g
//   v  = beta2 · v + (1 - beta2) · g²
//   p -= lr · (m / (1 - beta1^step)) / (sqrt(v / (1 - beta2^step)) + eps)
void adamw_step(const ExecContext& ec, Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                const AdamWConfig& cfg);

// x (any shape) f32 -> Σ x², each square and sum in f64.
double sum_of_squares(const ExecContext& ec, const Tensor& x);

// Transition: the forms without a context, until nn/ and parallel/ are migrated (issue 11).
inline void adamw_step(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                       const AdamWConfig& cfg) {
  adamw_step(ExecContext::host(), params, grads, m, v, cfg);
}
inline double sum_of_squares(const Tensor& x) { return sum_of_squares(ExecContext::host(), x); }

}  // namespace weft::kernels
