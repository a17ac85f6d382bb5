// The implementations of kernels/optimizer.h, one template per kernel:
// kernels/cpu/optimizer.cpp and kernels/cuda/ define the Backend::cpu and
// Backend::cuda specializations. Only kernels/optimizer.cpp calls them, after
// checking the arguments.
//
// AdamW and the gradient norm's sum of squares (kernels/optimizer.h); on CUDA
// sum_of_squares waits for the stream (the sum returns to the host).
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/dispatch.h"
#include "weft/kernels/optimizer.h"

namespace weft::kernels::impl {

template <Backend B>
void adamw_step(const ExecContext& ec, Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                const AdamWConfig& cfg);
template <Backend B>
double sum_of_squares(const ExecContext& ec, const Tensor& x);

}  // namespace weft::kernels::impl
