// The CPU implementations of kernels/optimizer.h (OpenMP loops, fixed-block reductions); callers go
// through kernels/optimizer.h, which checks the devices and dispatches here.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/optimizer.h"

namespace weft::kernels::cpu {

void adamw_step(const ExecContext& ec, Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                const AdamWConfig& cfg);
double sum_of_squares(const ExecContext& ec, const Tensor& x);

}  // namespace weft::kernels::cpu
