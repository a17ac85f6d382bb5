// The device-code helpers that the kernels (kernels/cuda/common.cuh), the
// local backend's GPU reductions (comm/cuda/reduce.cu) and the dtype
// conversions (core/cuda/convert.cu) share: grid sizes and f32 / bf16 element
// access, bf16 stored as raw 16-bit words and rounded to nearest even, NaN kept
// quiet, bit for bit as core/dtype.h's f32_to_bf16. Included only by .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace weft::cuda {

// Blocks of `threads` for n elements of a grid-stride loop, capped where more
// blocks add nothing.
inline unsigned blocks_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 * 32 ? 65535 * 32 : b));
}

// T is float or uint16_t (bf16 bits).
__device__ __forceinline__ float load_f(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load_f(const uint16_t* p, int64_t i) {
  return __uint_as_float(static_cast<uint32_t>(p[i]) << 16);
}
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

}  // namespace weft::cuda
