// What every CUDA kernel file of kernels/cuda/ shares: the stream of an
// execution context, checked launches (and WEFT_CUDA_CHECK), f32/bf16 element
// access (core/cuda/common.cuh), and warp/block reductions. Internal to
// kernels/cuda/; included only by .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "weft/core/cuda/check.h"
#include "weft/core/cuda/common.cuh"
#include "weft/core/error.h"
#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::kernels::cuda {

inline cudaStream_t stream_of(const ExecContext& ec) {
  return static_cast<cudaStream_t>(ec.stream());
}

// Launch checks (core/cuda/check.h), grid sizes and f32 / bf16 element access
// in device code (core/cuda/common.cuh).
using weft::cuda::blocks_for;
using weft::cuda::check_launch;
using weft::cuda::f32_to_bf16_bits;
using weft::cuda::load_f;
using weft::cuda::store_f;

// Calls fn.template operator()<T>() with T = float or uint16_t (bf16) for `dtype`.
template <typename Fn>
void dispatch_float(DType dtype, const char* what, Fn&& fn) {
  if (dtype == DType::f32) {
    fn.template operator()<float>();
  } else if (dtype == DType::bf16) {
    fn.template operator()<uint16_t>();
  } else {
    WEFT_FAIL("{}: expected an f32 or bf16 tensor, got {}", what, dtype_name(dtype));
  }
}

template <typename T>
T* dptr(const Tensor& t) {
  return static_cast<T*>(t.raw());
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every
// thread gets the result. `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x) / 32;
  v = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x) / 32;
  v = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

}  // namespace weft::kernels::cuda
