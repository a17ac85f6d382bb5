// The CUDA implementation of kernels/transpose.h; callers go through
// kernels/transpose.h, which checks the devices and dispatches here.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::kernels::cuda {

void transpose01(const ExecContext& ec, const Tensor& in, Tensor& out);

}  // namespace weft::kernels::cuda
