// The CUDA implementations of kernels/optimizer.h; callers go through
// kernels/optimizer.h, which checks the devices and dispatches here.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"
#include "weft/kernels/optimizer.h"

namespace weft::kernels::cuda {

void adamw_step(const ExecContext& ec, Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                const AdamWConfig& cfg);
// Waits for the stream: the sum returns to the host.
double sum_of_squares(const ExecContext& ec, const Tensor& x);

}  // namespace weft::kernels::cuda
