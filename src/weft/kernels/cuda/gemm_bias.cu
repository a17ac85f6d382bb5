#include "weft/kernels/cuda/common.cuh"
#include "weft/kernels/cuda/gemm.h"

namespace weft::kernels::cuda {

namespace {

template <typename C, typename B>
__global__ void add_bias_kernel(C* c, const B* bias, int64_t rows, int64_t cols, int64_t ldc) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, col = i % cols;
    store_f(c, r * ldc + col, load_f(c, r * ldc + col) + load_f(bias, col));
  }
}

}  // namespace

void add_bias_rows(const ExecContext& ec, void* c, DType c_type, const void* bias, DType bias_type,
                   int64_t rows, int64_t cols, int64_t ldc) {
  constexpr int kThreads = 256;
  dispatch_float(c_type, "gemm output", [&]<typename C>() {
    dispatch_float(bias_type, "gemm bias", [&]<typename B>() {
      add_bias_kernel<C, B><<<blocks_for(rows * cols, kThreads), kThreads, 0, stream_of(ec)>>>(
          static_cast<C*>(c), static_cast<const B*>(bias), rows, cols, ldc);
    });
  });
  check_launch("add_bias_rows");
}

}  // namespace weft::kernels::cuda
