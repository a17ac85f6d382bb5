// The implementations of kernels/transpose.h, one template per kernel:
// kernels/cpu/transpose.cpp and kernels/cuda/ define the Backend::cpu and
// Backend::cuda specializations. Only kernels/transpose.cpp calls them, after
// checking the arguments.
//
// transpose01 (kernels/transpose.h): row copies.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/dispatch.h"
#include "weft/kernels/transpose.h"

namespace weft::kernels::impl {

template <Backend B>
void transpose01(const ExecContext& ec, const Tensor& in, Tensor& out);

}  // namespace weft::kernels::impl
