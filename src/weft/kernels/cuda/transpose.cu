#include <cstdint>

#include "weft/kernels/cuda/common.cuh"
#include "weft/kernels/cuda/grid_stride.cuh"
#include "weft/kernels/impl/transpose.h"

namespace weft::kernels::impl {

// The launch and element helpers of kernels/cuda/ (common.cuh and its kin).
using namespace cuda;

namespace {

// src (rows, cols, width) -> dst (cols, rows, width), in words of type W.
// Output row n = (j, i) is input row (i, j); consecutive threads copy
// consecutive words of the output, whatever the dtype.
template <typename W>
__global__ void transpose01_kernel(const W* src, W* dst, int64_t rows, int64_t cols,
                                   int64_t width) {
  const int64_t total = rows * cols * width;
  for (int64_t k = grid_start(); k < total; k += grid_stride()) {
    const int64_t n = k / width, w = k % width;
    const int64_t j = n / rows, i = n % rows;
    dst[k] = src[(i * cols + j) * width + w];
  }
}

template <typename W>
void launch(const ExecContext& ec, const void* src, void* dst, int64_t rows, int64_t cols,
            int64_t bytes) {
  const int64_t width = bytes / static_cast<int64_t>(sizeof(W));
  transpose01_kernel<W><<<blocks_for(rows * cols * width, kThreads), kThreads, 0, stream_of(ec)>>>(
      static_cast<const W*>(src), static_cast<W*>(dst), rows, cols, width);
  check_launch("transpose01");
}

// Whether rows of `bytes` bytes at both addresses can be copied in words of `size`.
bool fits(const void* src, const void* dst, int64_t bytes, int64_t size) {
  return bytes % size == 0 && reinterpret_cast<uintptr_t>(src) % size == 0 &&
         reinterpret_cast<uintptr_t>(dst) % size == 0;
}

}  // namespace

template <>
void transpose01<Backend::cuda>(const ExecContext& ec, const Tensor& in, Tensor& out) {
  const int64_t rows = in.size(0), cols = in.size(1);
  const int64_t inner = rows * cols == 0 ? 0 : in.numel() / (rows * cols);
  const int64_t bytes = inner * dtype_bits(in.dtype()) / 8;
  if (rows * cols == 0 || bytes == 0) return;
  const char* src = static_cast<const char*>(in.raw());
  char* dst = static_cast<char*>(out.raw());
  // The widest word that divides a row and both addresses: 16-byte copies
  // for wide rows (logits), single bytes only where nothing wider fits.
  if (fits(src, dst, bytes, 16)) {
    launch<uint4>(ec, src, dst, rows, cols, bytes);
  } else if (fits(src, dst, bytes, 8)) {
    launch<uint2>(ec, src, dst, rows, cols, bytes);
  } else if (fits(src, dst, bytes, 4)) {
    launch<uint32_t>(ec, src, dst, rows, cols, bytes);
  } else if (fits(src, dst, bytes, 2)) {
    launch<uint16_t>(ec, src, dst, rows, cols, bytes);
  } else {
    launch<uint8_t>(ec, src, dst, rows, cols, bytes);
  }
}

}  // namespace weft::kernels::impl
