// The local backend's reductions on a GPU (reduce.h). The element access and
// the bf16 rounding are core/cuda/common.cuh's, the same bits as
// core/dtype.h's f32_to_bf16; the order of the arithmetic is
// comm/detail/reduce.cpp's, so a GPU collective returns what the CPU one does.
#include <cuda_runtime.h>

#include "weft/comm/cuda/reduce.h"
#include "weft/core/cuda/check.h"
#include "weft/core/cuda/common.cuh"
#include "weft/core/cuda/device_guard.h"
#include "weft/core/error.h"

namespace weft::comm::gpu {

namespace {

using weft::cuda::load_f;
using weft::cuda::store_f;

// The inputs' addresses, by value: a kernel parameter, so nothing is copied
// to the device before the launch.
struct Inputs {
  const void* p[kMaxInputs];
};

// What happens to the combined f32 value before it is stored, as
// detail::reduce_buffers decides it: avg multiplies by 1/n where 1/n is exact
// (n = 1, 2, 4, 8) and divides otherwise, so that the average of equal values
// is exact.
enum class Finish : int { keep, multiply, divide };

// inputs k x (n) f32 or bf16 -> out (n): combined in f32 input by input in
// order, finished, rounded once. The _rn intrinsics keep nvcc from contracting
// or reassociating anything: every step is one IEEE operation, as on the CPU.
template <typename T>  // float, or uint16_t holding bf16 bits
__global__ void reduce_float_kernel(Inputs in, int k, T* out, int64_t n, bool take_max,
                                    Finish finish, float factor) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float acc = load_f(static_cast<const T*>(in.p[0]), i);
    for (int j = 1; j < k; ++j) {
      const float x = load_f(static_cast<const T*>(in.p[j]), i);
      // max lets NaN win, as the CPU's Max.
      acc = take_max ? ((x > acc || x != x) ? x : acc) : __fadd_rn(acc, x);
    }
    if (finish == Finish::multiply) acc = __fmul_rn(acc, factor);
    if (finish == Finish::divide) acc = __fdiv_rn(acc, factor);
    store_f(out, i, acc);
  }
}

__device__ __forceinline__ double combine(ReduceOp op, double acc, double x) {
  if (op == ReduceOp::max) return (x > acc || isnan(x)) ? x : acc;
  return __dadd_rn(acc, x);
}
__device__ __forceinline__ int64_t combine(ReduceOp op, int64_t acc, int64_t x) {
  if (op == ReduceOp::max) return x > acc ? x : acc;
  // Wraps around on overflow, through unsigned arithmetic, as on the CPU.
  return static_cast<int64_t>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(x));
}
__device__ __forceinline__ double divided(double v, int divisor) {
  return __ddiv_rn(v, static_cast<double>(divisor));
}
__device__ __forceinline__ int64_t divided(int64_t v, int divisor) {
  return v / divisor;  // truncates toward zero, as on the CPU
}

// inputs k x (n) f64 or i64 -> out (n): combined in their own type, input by
// input in order; avg divides the sum by `divisor`.
template <typename T>
__global__ void reduce_wide_kernel(Inputs in, int k, T* out, int64_t n, ReduceOp op, int divisor) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    T acc = static_cast<const T*>(in.p[0])[i];
    for (int j = 1; j < k; ++j) acc = combine(op, acc, static_cast<const T*>(in.p[j])[i]);
    if (op == ReduceOp::avg) acc = divided(acc, divisor);
    out[i] = acc;
  }
}

}  // namespace

void reduce_buffers(Device d, DType dtype, ReduceOp op, void* out,
                    std::span<const void* const> inputs, int64_t count, int divisor) {
  WEFT_CHECK(!inputs.empty(), "internal: reduction over no inputs");
  WEFT_CHECK(inputs.size() <= static_cast<size_t>(kMaxInputs),
             "a reduction on {} combines at most {} ranks' buffers, got {}", d, kMaxInputs,
             inputs.size());
  WEFT_CHECK(
      dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f64 || dtype == DType::i64,
      "reductions need f32, bf16, f64 or i64 tensors, got {}", dtype_name(dtype));
  if (count == 0) return;
  Inputs in{};
  for (size_t j = 0; j < inputs.size(); ++j) in.p[j] = inputs[j];
  const int k = static_cast<int>(inputs.size());
  const int threads = 256;
  const unsigned blocks = weft::cuda::blocks_for(count, threads);
  const weft::cuda::DeviceGuard on(d.index);
  // The legacy default stream: weft's streams are blocking streams, so this
  // kernel runs after every kernel already queued on any of them (the
  // producers of the inputs) and before any queued later.
  if (dtype == DType::f64) {
    reduce_wide_kernel<double>
        <<<blocks, threads>>>(in, k, static_cast<double*>(out), count, op, divisor);
  } else if (dtype == DType::i64) {
    reduce_wide_kernel<int64_t>
        <<<blocks, threads>>>(in, k, static_cast<int64_t*>(out), count, op, divisor);
  } else {
    const bool take_max = op == ReduceOp::max;
    Finish finish = Finish::keep;
    float factor = 0.0f;
    if (op == ReduceOp::avg) {
      const bool exact = divisor == 1 || divisor == 2 || divisor == 4 || divisor == 8;
      finish = exact ? Finish::multiply : Finish::divide;
      factor = exact ? 1.0f / static_cast<float>(divisor) : static_cast<float>(divisor);
    }
    if (dtype == DType::f32) {
      reduce_float_kernel<float>
          <<<blocks, threads>>>(in, k, static_cast<float*>(out), count, take_max, finish, factor);
    } else {
      reduce_float_kernel<uint16_t><<<blocks, threads>>>(in, k, static_cast<uint16_t*>(out), count,
                                                         take_max, finish, factor);
    }
  }
  weft::cuda::check_launch("comm reduce_buffers");
}

}  // namespace weft::comm::gpu
