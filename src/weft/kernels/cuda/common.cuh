// What every CUDA kernel file of kernels/cuda/ shares: the stream of an
// execution context, checked launches, f32/bf16 element access (bf16 stored
// as raw 16-bit words, converted round-to-nearest-even exactly as
// core/dtype.h's f32_to_bf16), and warp/block reductions. Internal to
// kernels/cuda/; included only by .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "weft/core/error.h"
#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::kernels::cuda {

inline cudaStream_t stream_of(const ExecContext& ec) {
  return static_cast<cudaStream_t>(ec.stream());
}

// Throws weft::Error naming the kernel if its launch failed (bad
// configuration, or an earlier asynchronous error surfacing here).
inline void check_launch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  WEFT_CHECK(status == cudaSuccess, "CUDA kernel {} failed to launch: {} ({})", kernel,
             cudaGetErrorString(status), cudaGetErrorName(status));
}

#define WEFT_CUDA_CHECK(call)                                                   \
  do {                                                                          \
    const cudaError_t weft_status = (call);                                     \
    WEFT_CHECK(weft_status == cudaSuccess, "{} failed: {} ({})", #call,         \
               cudaGetErrorString(weft_status), cudaGetErrorName(weft_status)); \
  } while (0)

inline unsigned blocks_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 32 ? 65535 * 32 : b));
}

// f32 / bf16 element access in device code: T is float or uint16_t (bf16 bits).
__device__ __forceinline__ float load_f(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load_f(const uint16_t* p, int64_t i) {
  return __uint_as_float(static_cast<uint32_t>(p[i]) << 16);
}
// Round to nearest even; NaN stays a quiet NaN (as core/dtype.h).
__device__ __forceinline__ uint16_t f32_to_bf16_bits(float v) {
  uint32_t u = __float_as_uint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
__device__ __forceinline__ void store_f(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store_f(uint16_t* p, int64_t i, float v) {
  p[i] = f32_to_bf16_bits(v);
}

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
