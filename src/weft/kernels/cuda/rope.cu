#include "weft/kernels/cuda/common.cuh"
#include "weft/kernels/cuda/grid_stride.cuh"
#include "weft/kernels/impl/rope.h"

namespace weft::kernels::impl {

// The launch and element helpers of kernels/cuda/ (common.cuh and its kin).
using namespace cuda;

namespace {

// One (row, head, pair i) per thread of the grid-stride loop: x[i] and
// x[i + D/2] of one of the first H + Hkv heads of a row, rotated as the CPU's
// loop rotates them (products rounded before the sums, as the CPU compiles
// them without FMA).
template <typename T>
__global__ void rope_kernel(T* qkv, const float* table, RopeDims d, float sign) {
  const int64_t half = d.D / 2, n = d.B * d.T * d.rotated_heads * half;
  for (int64_t k = grid_start(); k < n; k += grid_stride()) {
    const int64_t i = k % half, h = k / half % d.rotated_heads, row = k / half / d.rotated_heads;
    const int64_t position = (d.sequence_major ? row / d.B : row % d.T) + d.position_offset;
    const float c = table[(position * half + i) * 2],
                s = sign * table[(position * half + i) * 2 + 1];
    const int64_t at = row * d.width + h * d.D + i;
    const float x1 = load_f(qkv, at), x2 = load_f(qkv, at + half);
    store_f(qkv, at, __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s)));
    store_f(qkv, at + half, __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s)));
  }
}

}  // namespace

template <>
void rope_rotate<Backend::cuda>(const ExecContext& ec, Tensor& qkv, const Tensor& table,
                                const RopeDims& d, float sign) {
  const int64_t n = d.B * d.T * d.rotated_heads * (d.D / 2);
  if (n == 0) return;
  dispatch_float(qkv.dtype(), "rope", [&]<typename T>() {
    rope_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, stream_of(ec)>>>(
        dptr<T>(qkv), dptr<const float>(table), d, sign);
    check_launch("rope");
  });
}

}  // namespace weft::kernels::impl
