#include "weft/kernels/cuda/common.cuh"
#include "weft/kernels/cuda/gemm.h"

namespace weft::kernels::cuda {

namespace {

struct Strides {
  int64_t batch0, batch1, row, col;
};

__device__ __forceinline__ int64_t offset(const Strides& s, int64_t i0, int64_t i1, int64_t r,
                                          int64_t c) {
  return i0 * s.batch0 + i1 * s.batch1 + r * s.row + c * s.col;
}

// I: the index type of the element arithmetic, 32-bit where every index
// fits (64-bit division costs many times the 32-bit one, and this kernel is
// otherwise a copy).
template <typename S, typename D, typename B, typename I>
__global__ void convert_kernel(const S* src, Strides ss, D* dst, Strides ds, const B* bias,
                               I batch1, I rows, I cols, I total) {
  for (I i = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    const I c = i % cols, r = i / cols % rows, i1 = i / (cols * rows) % batch1,
            i0 = i / (cols * rows * batch1);
    float v = load_f(src, offset(ss, i0, i1, r, c));
    if (bias) v += load_f(bias, c);
    store_f(dst, offset(ds, i0, i1, r, c), v);
  }
}

Strides strides_of(const StridedMatrices& m) {
  return {m.batch_stride[0], m.batch_stride[1], m.row_stride, m.col_stride};
}

}  // namespace

void convert_matrices(const ExecContext& ec, const StridedMatrices& src, const StridedMatrices& dst,
                      const void* bias, DType bias_type) {
  const int64_t total = dst.batch[0] * dst.batch[1] * dst.rows * dst.cols;
  if (total == 0) return;
  constexpr int kThreads = 256;
  dispatch_float(src.dtype, "gemm conversion source", [&]<typename S>() {
    dispatch_float(dst.dtype, "gemm conversion destination", [&]<typename D>() {
      dispatch_float(bias_type, "gemm bias", [&]<typename B>() {
        auto launch = [&]<typename I>() {
          convert_kernel<S, D, B, I><<<blocks_for(total, kThreads), kThreads, 0, stream_of(ec)>>>(
              static_cast<const S*>(src.data), strides_of(src), static_cast<D*>(dst.data),
              strides_of(dst), static_cast<const B*>(bias), static_cast<I>(dst.batch[1]),
              static_cast<I>(dst.rows), static_cast<I>(dst.cols), static_cast<I>(total));
        };
        if (total < (int64_t{1} << 31)) {
          launch.template operator()<uint32_t>();
        } else {
          launch.template operator()<int64_t>();
        }
      });
    });
  });
  check_launch("gemm convert_matrices");
}

}  // namespace weft::kernels::cuda
