// Grid-stride loops for the element-wise kernels of kernels/cuda/: any grid
// covers any element count, so launches cap their grid (blocks_for) and the
// index stays 64-bit for tensors past 2^31 elements. Internal to kernels/cuda/.
#pragma once

#include <cstdint>

namespace weft::kernels::cuda {

inline constexpr int kThreads = 256;

__device__ __forceinline__ int64_t grid_start() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() {
  return static_cast<int64_t>(blockDim.x) * gridDim.x;
}

// Blocks for a kernel that gives one block to each of `rows` rows and loops
// when there are more rows than blocks.
inline unsigned row_blocks(int64_t rows) {
  constexpr int64_t kMaxBlocks = 65535 * 32;
  return static_cast<unsigned>(rows < 1 ? 1 : (rows > kMaxBlocks ? kMaxBlocks : rows));
}

}  // namespace weft::kernels::cuda
