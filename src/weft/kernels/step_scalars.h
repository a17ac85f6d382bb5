// The scalars of a training step, kept on the device the model runs on, so
// that a step on a GPU reads the host once, at its end (train/run_loop.cpp):
// the micro-batches' losses accumulate on the device, the gradient norm and
// the clipping factor are computed there, and AdamW reads that factor in
// place (kernels::AdamWConfig::grad_scale_from). On the CPU the same calls
// do the same arithmetic on host memory, bit for bit what the host code they
// replace computed.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::kernels {

// acc (f64, one element) += x[0] (f32); reset: acc = x[0] (the first term).
void accumulate_scalar(const ExecContext& ec, const Tensor& x, Tensor& acc, bool reset = false);

// out (f32, two elements) = {f32(acc[0] / divisor), second}.
void finish_mean(const ExecContext& ec, const Tensor& acc, double divisor, float second,
                 Tensor& out);

// norm (f64, one element): the global sum of squares of the gradient in,
// its square root sqrt(max(sum, 0)) out. scale (f32, one element) = NaN when
// loss[0] (f32) or the norm is not finite (AdamW then skips the step);
// otherwise max_norm / (norm + 1e-6) when max_norm > 0 and norm > max_norm,
// else 1 (optim::clip_scale).
void clip_scale(const ExecContext& ec, const Tensor& loss, Tensor& norm, double max_norm,
                Tensor& scale);

}  // namespace weft::kernels
