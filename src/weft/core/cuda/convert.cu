// f32 <-> bf16 conversion of device memory, for Tensor::copy_from between
// dtypes on one GPU (the weight casts of a bf16 step), with the rounding of
// core/cuda/common.cuh.
#include <cuda_runtime.h>

#include <cstdint>

#include "weft/core/cuda.h"
#include "weft/core/cuda/common.cuh"
#include "weft/core/cuda/device_guard.h"
#include "weft/core/error.h"

namespace weft::cuda {

namespace {

// src (n) f32 -> dst (n) bf16
__global__ void f32_to_bf16_kernel(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    store_f(dst, i, src[i]);
  }
}

// src (n) bf16 -> dst (n) f32
__global__ void bf16_to_f32_kernel(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = load_f(src, i);
  }
}

}  // namespace

bool convert_on_device(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n,
                       Device d) {
  const bool down = src_dtype == DType::f32 && dst_dtype == DType::bf16;
  const bool up = src_dtype == DType::bf16 && dst_dtype == DType::f32;
  if (!down && !up) return false;
  if (n == 0) return true;
  const DeviceGuard guard(d.index);
  const int threads = 256;
  const int64_t wanted = (n + threads - 1) / threads;
  const unsigned blocks = static_cast<unsigned>(wanted < 65536 ? wanted : 65536);
  // The legacy default stream: ordered after and before the work of every
  // weft stream (they are blocking streams), without a host wait.
  const KernelSpan span(down ? "convert f32->bf16" : "convert bf16->f32", nullptr);
  if (down) {
    f32_to_bf16_kernel<<<blocks, threads>>>(static_cast<const float*>(src),
                                            static_cast<uint16_t*>(dst), n);
  } else {
    bf16_to_f32_kernel<<<blocks, threads>>>(static_cast<const uint16_t*>(src),
                                            static_cast<float*>(dst), n);
  }
  const cudaError_t status = cudaGetLastError();
  WEFT_CHECK(status == cudaSuccess, "CUDA dtype conversion on {} failed to launch: {}", d,
             cudaGetErrorString(status));
  return true;
}

}  // namespace weft::cuda
