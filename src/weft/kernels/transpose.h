// Swapping the first two dimensions of a tensor: the change between the
// batch-major (B, T, ...) and sequence-major (T, B, ...) token layouts (token
// ids and targets on their way into a sequence-parallel model, logits on their
// way out).
#pragma once

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::kernels {

// in (A, B, ...) -> out (B, A, ...), any dtype, rank >= 2: out[j, i, ...] = in[i, j, ...].
// out must not overlap in.
void transpose01(const ExecContext& ec, const Tensor& in, Tensor& out);

// Transition: the forms without a context, until nn/ and parallel/ are migrated (issue 11).
inline void transpose01(const Tensor& in, Tensor& out) {
  transpose01(ExecContext::host(), in, out);
}

}  // namespace weft::kernels
