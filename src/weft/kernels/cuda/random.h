// The CUDA implementations of kernels/random.h, drawing the CPU's Philox
// numbers bit for bit (kernels/cuda/philox.cuh); callers go through
// kernels/random.h, which checks the devices and dispatches here.
#pragma once

#include <cstdint>

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::kernels::cuda {

void fill_uniform(const ExecContext& ec, uint64_t seed, uint64_t offset, Tensor& out);
void dropout_forward(const ExecContext& ec, const Tensor& x, float p, uint64_t seed,
                     uint64_t offset, Tensor& y, Tensor& mask);
void dropout_backward(const ExecContext& ec, const Tensor& dy, const Tensor& mask, float p,
                      Tensor& dx);

}  // namespace weft::kernels::cuda
