// The CPU implementations of kernels/random.h (Philox streams in parallel chunks); callers go
// through kernels/random.h, which checks the devices and dispatches here.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/random.h"

namespace weft::kernels::cpu {

void fill_uniform(const ExecContext& ec, uint64_t seed, uint64_t offset, Tensor& out);
void dropout_forward(const ExecContext& ec, const Tensor& x, float p, uint64_t seed,
                     uint64_t offset, Tensor& y, Tensor& mask);
void dropout_backward(const ExecContext& ec, const Tensor& dy, const Tensor& mask, float p,
                      Tensor& dx);

}  // namespace weft::kernels::cpu
