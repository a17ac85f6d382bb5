#include <algorithm>
#include <cmath>

#include "weft/kernels/cuda/common.cuh"
#include "weft/kernels/cuda/grid_stride.cuh"
#include "weft/kernels/impl/optimizer.h"

namespace weft::kernels::impl {

// The launch and element helpers of kernels/cuda/ (common.cuh and its kin).
using namespace cuda;

namespace {

// Blocks of the first pass of sum_of_squares: a fixed number for a given
// size (not one tied to the device), so the sum is the same on every GPU.
constexpr int kSumBlocks = 1024;
constexpr int kSumThreads = 256;

// p, g, m, v (n): one AdamW step. The CPU's formula with every operation rounded on its own (_rn
// intrinsics: no FMA contraction, which the CPU loop does not have either), so each element is
// updated bit for bit as on the CPU.
__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, float scale,
                             float b1, float a1, float b2, float a2, float decay, float step_size,
                             float inv_sqrt_bias2, float eps) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) {
    const float gi = __fmul_rn(g[i], scale);
    const float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(a1, gi));
    const float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(a2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    const float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(vi), inv_sqrt_bias2), eps);
    p[i] = __fsub_rn(__fmul_rn(p[i], decay), __fdiv_rn(__fmul_rn(step_size, mi), denom));
  }
}

// Sum of v over the block (blockDim.x == kSumThreads) in a fixed tree, the
// same for every run; every thread gets the result.
__device__ double block_sum_f64(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int half = kSumThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  return shared[0];
}

// x (n) -> partial (gridDim.x): partial[block] = Σ x² over the elements of the block's grid-stride
// walk, squares and sums in f64 (a square of an f32 is exact in f64).
__global__ void sum_of_squares_kernel(const float* x, int64_t n, double* partial) {
  __shared__ double shared[kSumThreads];
  double acc = 0.0;
  for (int64_t i = grid_start(); i < n; i += grid_stride()) {
    const double xi = x[i];
    acc += xi * xi;
  }
  const double total = block_sum_f64(acc, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// partial (count) -> out (1) = Σ partial
__global__ void sum_partials_kernel(const double* partial, int count, double* out) {
  __shared__ double shared[kSumThreads];
  double acc = 0.0;
  for (int i = static_cast<int>(threadIdx.x); i < count; i += kSumThreads) acc += partial[i];
  const double total = block_sum_f64(acc, shared);
  if (threadIdx.x == 0) *out = total;
}

}  // namespace

template <>
void adamw_step<Backend::cuda>(const ExecContext& ec, Tensor& params, const Tensor& grads,
                               Tensor& m, Tensor& v, const AdamWConfig& cfg) {
  const int64_t n = params.numel();
  if (n == 0) return;
  // The per-step constants exactly as the CPU computes them: f64 on the host,
  // rounded once to f32.
  const double bias1 = 1.0 - std::pow(static_cast<double>(cfg.beta1), cfg.step);
  const double bias2 = 1.0 - std::pow(static_cast<double>(cfg.beta2), cfg.step);
  const float decay = static_cast<float>(1.0 - static_cast<double>(cfg.lr) * cfg.weight_decay);
  const float step_size = static_cast<float>(cfg.lr / bias1);
  const float inv_sqrt_bias2 = static_cast<float>(1.0 / std::sqrt(bias2));
  adamw_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream_of(ec)>>>(
      dptr<float>(params), dptr<const float>(grads), dptr<float>(m), dptr<float>(v), n,
      cfg.grad_scale, cfg.beta1, 1.0f - cfg.beta1, cfg.beta2, 1.0f - cfg.beta2, decay, step_size,
      inv_sqrt_bias2, cfg.eps);
  check_launch("adamw_step");
}

template <>
double sum_of_squares<Backend::cuda>(const ExecContext& ec, const Tensor& x) {
  const int64_t n = x.numel();
  if (n == 0) return 0.0;
  const int blocks =
      static_cast<int>(std::min<int64_t>(kSumBlocks, (n + kSumThreads - 1) / kSumThreads));
  Tensor partial = ec.empty({blocks + 1}, DType::f64);
  double* parts = dptr<double>(partial);
  sum_of_squares_kernel<<<blocks, kSumThreads, 0, stream_of(ec)>>>(dptr<const float>(x), n, parts);
  check_launch("sum_of_squares");
  sum_partials_kernel<<<1, kSumThreads, 0, stream_of(ec)>>>(parts, blocks, parts + blocks);
  check_launch("sum_of_squares (block sums)");
  double total = 0.0;
  WEFT_CUDA_CHECK(cudaMemcpyAsync(&total, parts + blocks, sizeof(double), cudaMemcpyDeviceToHost,
                                  stream_of(ec)));
  WEFT_CUDA_CHECK(cudaStreamSynchronize(stream_of(ec)));
  return total;
}

}  // namespace weft::kernels::impl
