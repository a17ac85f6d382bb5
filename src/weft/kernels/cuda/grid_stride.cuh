// Grid-stride loops for the element-wise kernels of kernels/cuda/: any grid
// covers any element count, so launches cap their grid (blocks_for) and the
// index stays 64-bit for tensors past 2^31 elements. Internal to kernels/cuda/.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

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

// Blocks for a column reduction over row blocks: x covers the `columns`
// (kThreads per block), y the `row_blocks` (looping past the 65535 a grid's y
// can hold).
inline dim3 column_block_grid(int64_t columns, int64_t row_blocks) {
  return dim3(static_cast<unsigned>((columns + kThreads - 1) / kThreads),
              static_cast<unsigned>(row_blocks < 65535 ? row_blocks : 65535));
}

// 16 bytes of T (8 bf16 or 4 f32): the unit in which the memory-bound kernels
// move data where their tensors allow (128-bit loads and stores instead of
// 2- or 4-byte ones). load_f / store_f read and write its elements.
template <typename T>
struct alignas(16) Pack {
  static constexpr int kSize = 16 / static_cast<int>(sizeof(T));
  T v[kSize];
};
template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const T* p, int64_t pack) {
  return reinterpret_cast<const Pack<T>*>(p)[pack];
}
template <typename T>
__device__ __forceinline__ void store_pack(T* p, int64_t pack, const Pack<T>& v) {
  reinterpret_cast<Pack<T>*>(p)[pack] = v;
}
// Whether every pointer is on a 16-byte boundary (allocations are; views
// need not be), so that a kernel may access them in Packs.
inline bool packs_fit(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

}  // namespace weft::kernels::cuda
