#include "weft/kernels/cuda/common.cuh"
#include "weft/kernels/cuda/grid_stride.cuh"
#include "weft/kernels/cuda/philox.cuh"
#include "weft/kernels/elementwise.h"
#include "weft/kernels/impl/random.h"

namespace weft::kernels::impl {

// The launch and element helpers of kernels/cuda/ (common.cuh and its kin).
using namespace cuda;

namespace {

// Philox blocks that stream elements offset .. offset + count - 1 fall in:
// each thread computes one block and uses its (up to) four words, so no
// block is computed twice.
struct BlockRange {
  uint64_t first;
  int64_t count;
};
BlockRange blocks_of(uint64_t offset, int64_t count) {
  const uint64_t first = offset / 4, last = (offset + static_cast<uint64_t>(count) - 1) / 4;
  return {first, static_cast<int64_t>(last - first + 1)};
}

// Calls f(i, u) with u = uniform_at(seed, offset, i) for each i in [0, count)
// whose stream element offset + i lies in Philox block `block`.
template <typename F>
__device__ __forceinline__ void for_block_uniforms(uint64_t seed, uint64_t offset, int64_t count,
                                                   uint64_t block, F&& f) {
  const uint4 words = philox_stream_block(seed, block);
  for (uint64_t w = 0; w < 4; ++w) {
    const uint64_t n = block * 4 + w;
    if (n < offset) continue;
    const uint64_t i = n - offset;
    if (i >= static_cast<uint64_t>(count)) break;
    f(static_cast<int64_t>(i), cuda::bits_to_uniform(philox_word(words, w)));
  }
}

// out (count) = stream elements offset .. offset + count - 1
__global__ void fill_uniform_kernel(uint64_t seed, uint64_t offset, int64_t count,
                                    BlockRange blocks, float* out) {
  for (int64_t k = grid_start(); k < blocks.count; k += grid_stride()) {
    for_block_uniforms(seed, offset, count, blocks.first + static_cast<uint64_t>(k),
                       [&](int64_t i, float u) { out[i] = u; });
  }
}

// x (count) -> y (count), mask (count)
template <typename T>
__global__ void dropout_forward_kernel(const T* x, float p, float scale, uint64_t seed,
                                       uint64_t offset, int64_t count, BlockRange blocks, T* y,
                                       uint8_t* mask) {
  for (int64_t k = grid_start(); k < blocks.count; k += grid_stride()) {
    for_block_uniforms(seed, offset, count, blocks.first + static_cast<uint64_t>(k),
                       [&](int64_t i, float u) {
                         const bool keep = u >= p;
                         mask[i] = keep;
                         store_f(y, i, keep ? load_f(x, i) * scale : 0.0f);
                       });
  }
}

// dy (n), mask (n) -> dx (n)
template <typename T>
__global__ void dropout_backward_kernel(const T* dy, const uint8_t* mask, float scale, T* dx,
                                        int64_t n) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) {
    store_f(dx, i, mask[i] ? load_f(dy, i) * scale : 0.0f);
  }
}

}  // namespace

template <>
void fill_uniform<Backend::cuda>(const ExecContext& ec, uint64_t seed, uint64_t offset,
                                 Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const BlockRange blocks = blocks_of(offset, n);
  fill_uniform_kernel<<<blocks_for(blocks.count, kThreads), kThreads, 0, stream_of(ec)>>>(
      seed, offset, n, blocks, dptr<float>(out));
  check_launch("fill_uniform");
}

template <>
void dropout_forward<Backend::cuda>(const ExecContext& ec, const Tensor& x, float p, uint64_t seed,
                                    uint64_t offset, Tensor& y, Tensor& mask) {
  const int64_t n = x.numel();
  if (n == 0) return;
  if (p == 0.0f) {
    // As the CPU: an exact copy (NaN payloads included) and a mask of ones.
    if (y.raw() != x.raw()) {
      WEFT_CUDA_CHECK(cudaMemcpyAsync(y.raw(), x.raw(), static_cast<size_t>(x.nbytes()),
                                      cudaMemcpyDeviceToDevice, stream_of(ec)));
    }
    WEFT_CUDA_CHECK(cudaMemsetAsync(mask.raw(), 1, static_cast<size_t>(n), stream_of(ec)));
    return;
  }
  const float scale = 1.0f / (1.0f - p);
  const BlockRange blocks = blocks_of(offset, n);
  dispatch_float(x.dtype(), "dropout_forward", [&]<typename T>() {
    dropout_forward_kernel<T><<<blocks_for(blocks.count, kThreads), kThreads, 0, stream_of(ec)>>>(
        dptr<const T>(x), p, scale, seed, offset, n, blocks, dptr<T>(y), dptr<uint8_t>(mask));
    check_launch("dropout_forward");
  });
}

template <>
void dropout_backward<Backend::cuda>(const ExecContext& ec, const Tensor& dy, const Tensor& mask,
                                     float p, Tensor& dx) {
  const int64_t n = dy.numel();
  if (n == 0) return;
  const float scale = 1.0f / (1.0f - p);
  dispatch_float(dy.dtype(), "dropout_backward", [&]<typename T>() {
    dropout_backward_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, stream_of(ec)>>>(
        dptr<const T>(dy), dptr<const uint8_t>(mask), scale, dptr<T>(dx), n);
    check_launch("dropout_backward");
  });
}

}  // namespace weft::kernels::impl
