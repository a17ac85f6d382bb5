// The implementations of kernels/rope.h, one template per kernel:
// kernels/cpu/rope.cpp and kernels/cuda/rope.cu define the Backend::cpu and
// Backend::cuda specializations. Only kernels/rope.cpp calls them, after
// checking the arguments (rope_table is computed there, on the host, for
// every device).
//
// Both apply one rotation to the first H + Hkv heads of every row: an OpenMP
// loop over rows on the CPU, a grid-stride loop over (row, head, pair) on CUDA.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/dispatch.h"
#include "weft/kernels/rope.h"

namespace weft::kernels::impl {

// The shape of a rope call, as kernels/rope.cpp checked it.
struct RopeDims {
  int64_t B, T, D;
  int64_t rotated_heads;  // H + Hkv: the q and k heads at the start of a row
  int64_t width;          // (H + 2·Hkv)·D
  bool sequence_major;
  int64_t position_offset;

  // The position of row `row` of the activation.
  int64_t position(int64_t row) const {
    return (sequence_major ? row / B : row % T) + position_offset;
  }
};

// sign +1: forward (rotate by the angle); -1: backward (by minus the angle).
template <Backend B>
void rope_rotate(const ExecContext& ec, Tensor& qkv, const Tensor& table, const RopeDims& dims,
                 float sign);

}  // namespace weft::kernels::impl
