// The CPU implementations of kernels/transpose.h (row copies in parallel); callers go
// through kernels/transpose.h, which checks the devices and dispatches here.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/transpose.h"

namespace weft::kernels::cpu {

void transpose01(const ExecContext& ec, const Tensor& in, Tensor& out);

}  // namespace weft::kernels::cpu
