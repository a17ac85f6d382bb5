// The implementations of kernels/random.h, one template per kernel:
// kernels/cpu/random.cpp and kernels/cuda/ define the Backend::cpu and
// Backend::cuda specializations. Only kernels/random.cpp calls them, after
// checking the arguments.
//
// Uniforms and dropout (kernels/random.h) from Philox streams; CUDA draws the
// CPU's numbers bit for bit (kernels/cuda/philox.cuh).
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/dispatch.h"
#include "weft/kernels/random.h"

namespace weft::kernels::impl {

template <Backend B>
void fill_uniform(const ExecContext& ec, uint64_t seed, uint64_t offset, Tensor& out);
template <Backend B>
void dropout_forward(const ExecContext& ec, const Tensor& x, float p, uint64_t seed,
                     uint64_t offset, Tensor& y, Tensor& mask);
template <Backend B>
void dropout_backward(const ExecContext& ec, const Tensor& dy, const Tensor& mask, float p,
                      Tensor& dx);

}  // namespace weft::kernels::impl
