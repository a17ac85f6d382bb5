#include "weft/kernels/cuda/common.cuh"
#include "weft/kernels/cuda/grid_stride.cuh"
#include "weft/kernels/elementwise.h"
#include "weft/kernels/impl/activation.h"

namespace weft::kernels::impl {

// The launch and element helpers of kernels/cuda/ (common.cuh and its kin).
using namespace cuda;

namespace {

// The CPU's bias_backward block: dbias gets per-block partial sums added in
// block order, so the GPU adds in exactly the CPU's order.
constexpr int64_t kBlockRows = 64;

// oneDNN's gelu_tanh constants (sqrt(2/pi) rounded to f32 as oneDNN writes it).
constexpr float kSqrt2OverPi = 0.79788458347320556640625f;
constexpr float kFitting = 0.044715f;

__device__ __forceinline__ float gelu(float s) {
  const float g = kSqrt2OverPi * s * (1.0f + kFitting * s * s);
  return 0.5f * s * (1.0f + tanhf(g));
}

// d/ds of 0.5·s·(1 + tanh(g(s))) times dy, written as oneDNN's reference gelu_tanh_bwd.
__device__ __forceinline__ float gelu_grad(float dy, float s) {
  const float v = tanhf(kSqrt2OverPi * s * (1.0f + kFitting * s * s));
  const float dg = kSqrt2OverPi * (1.0f + 3.0f * kFitting * s * s);
  return dy * 0.5f * (1.0f + v) * (1.0f + s * (1.0f - v) * dg);
}

// x (n) -> y (n): the first `packs` Packs 16 bytes at a time (0 where the
// tensors are not 16-byte aligned), the rest element by element; either
// way each element gets the same arithmetic.
template <typename T>
__global__ void gelu_forward_kernel(const T* x, T* y, int64_t n, int64_t packs) {
  constexpr int K = Pack<T>::kSize;
  for (int64_t p = grid_start(); p < packs; p += grid_stride()) {
    const Pack<T> a = load_pack(x, p);
    Pack<T> out;
#pragma unroll
    for (int k = 0; k < K; ++k) store_f(out.v, k, gelu(load_f(a.v, k)));
    store_pack(y, p, out);
  }
  for (int64_t i = packs * K + grid_start(); i < n; i += grid_stride()) {
    store_f(y, i, gelu(load_f(x, i)));
  }
}

// dy (n), x (n) -> dx (n), in Packs as the forward.
template <typename T>
__global__ void gelu_backward_kernel(const T* dy, const T* x, T* dx, int64_t n, int64_t packs) {
  constexpr int K = Pack<T>::kSize;
  for (int64_t p = grid_start(); p < packs; p += grid_stride()) {
    const Pack<T> a = load_pack(x, p), g = load_pack(dy, p);
    Pack<T> out;
#pragma unroll
    for (int k = 0; k < K; ++k) store_f(out.v, k, gelu_grad(load_f(g.v, k), load_f(a.v, k)));
    store_pack(dx, p, out);
  }
  for (int64_t i = packs * K + grid_start(); i < n; i += grid_stride()) {
    store_f(dx, i, gelu_grad(load_f(dy, i), load_f(x, i)));
  }
}

// silu(g) = g / (1 + e^-g) and the sigmoid 1 / (1 + e^-g), as the CPU computes them.
struct Silu {
  float sigmoid, value;
  __device__ explicit Silu(float g) {
    const float e = expf(-g);
    sigmoid = 1.0f / (1.0f + e);
    value = g / (1.0f + e);
  }
};

// gu (rows, 2n) = [gate | up] -> out (rows, n) = silu(gate)·up
template <typename T>
__global__ void swiglu_forward_kernel(const T* gu, T* out, int64_t rows, int64_t n) {
  for (int64_t i = grid_start(); i < rows * n; i += grid_stride()) {
    const int64_t r = i / n, j = i % n;
    store_f(out, i, Silu(load_f(gu, r * 2 * n + j)).value * load_f(gu, r * 2 * n + n + j));
  }
}

// dy (rows, n), gu (rows, 2n) -> dgu (rows, 2n): dgate = dy·up·silu'(gate), dup = dy·silu(gate)
template <typename T>
__global__ void swiglu_backward_kernel(const T* dy, const T* gu, T* dgu, int64_t rows, int64_t n) {
  for (int64_t i = grid_start(); i < rows * n; i += grid_stride()) {
    const int64_t r = i / n, j = i % n;
    const float gate = load_f(gu, r * 2 * n + j), up = load_f(gu, r * 2 * n + n + j);
    const float grad = load_f(dy, i);
    const Silu s(gate);
    store_f(dgu, r * 2 * n + j, grad * up * (s.sigmoid * (1.0f + gate * (1.0f - s.sigmoid))));
    store_f(dgu, r * 2 * n + n + j, grad * s.value);
  }
}

// y (n, c) += bias (c)
template <typename T>
__global__ void bias_add_kernel(T* y, const float* bias, int64_t n, int64_t c) {
  for (int64_t i = grid_start(); i < n * c; i += grid_stride()) {
    store_f(y, i, load_f(y, i) + bias[i % c]);
  }
}

// dy (n, c) -> partial (nblocks, c): partial[b, j] = Σ dy[r, j] over the rows r
// of block b, in row order. A thread owns W consecutive columns (W = one Pack
// when the rows are 16-byte aligned, else 1): the same sums, wider loads.
template <typename T, int W>
__global__ void column_block_sums_kernel(const T* dy, float* partial, int64_t n, int64_t c) {
  const int64_t j = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * W;
  if (j >= c) return;
  const int64_t nblocks = (n + kBlockRows - 1) / kBlockRows;
  for (int64_t b = blockIdx.y; b < nblocks; b += gridDim.y) {
    const int64_t end = min(n, (b + 1) * kBlockRows);
    float sum[W];
#pragma unroll
    for (int k = 0; k < W; ++k) sum[k] = 0.0f;
#pragma unroll 8
    for (int64_t r = b * kBlockRows; r < end; ++r) {
      if constexpr (W == 1) {
        sum[0] += load_f(dy, r * c + j);
      } else {
        const Pack<T> a = load_pack(dy, (r * c + j) / W);
#pragma unroll
        for (int k = 0; k < W; ++k) sum[k] += load_f(a.v, k);
      }
    }
#pragma unroll
    for (int k = 0; k < W; ++k) partial[b * c + j + k] = sum[k];
  }
}

// partial (nblocks, c) -> out (c) += partial[b] for b = 0, 1, ... in order.
// The loads go out 8 at a time ahead of their adds (latency, not bandwidth,
// bounds this kernel: one thread per column); the adds keep block order.
__global__ void add_block_sums_kernel(const float* partial, int64_t nblocks, int64_t c,
                                      float* out) {
  for (int64_t j = grid_start(); j < c; j += grid_stride()) {
    float acc = out[j];
    int64_t b = 0;
    for (; b + 8 <= nblocks; b += 8) {
      float v[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = partial[(b + k) * c + j];
#pragma unroll
      for (int k = 0; k < 8; ++k) acc += v[k];
    }
    for (; b < nblocks; ++b) acc += partial[b * c + j];
    out[j] = acc;
  }
}

// a (n), b (n) -> out (n) = a + b
template <typename T>
__global__ void add_kernel(const T* a, const T* b, T* out, int64_t n) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) {
    store_f(out, i, load_f(a, i) + load_f(b, i));
  }
}

// y (n) += alpha·x (n); alpha·x is rounded before the add, as the CPU loop (compiled without FMA)
// computes it.
template <typename TX, typename TY>
__global__ void axpy_kernel(float alpha, const TX* x, TY* y, int64_t n) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) {
    store_f(y, i, __fadd_rn(load_f(y, i), __fmul_rn(alpha, load_f(x, i))));
  }
}

// y (n) *= alpha
template <typename T>
__global__ void scale_kernel(T* y, float alpha, int64_t n) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) store_f(y, i, load_f(y, i) * alpha);
}

}  // namespace

template <>
void gelu_forward<Backend::cuda>(const ExecContext& ec, const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_float(x.dtype(), "gelu_forward", [&]<typename T>() {
    const int64_t packs = packs_fit({x.raw(), y.raw()}) ? n / Pack<T>::kSize : 0;
    gelu_forward_kernel<T>
        <<<blocks_for(packs > 0 ? packs : n, kThreads), kThreads, 0, stream_of(ec)>>>(
            dptr<const T>(x), dptr<T>(y), n, packs);
    check_launch("gelu_forward");
  });
}

template <>
void gelu_backward<Backend::cuda>(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                                  Tensor& dx) {
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_float(x.dtype(), "gelu_backward", [&]<typename T>() {
    const int64_t packs = packs_fit({dy.raw(), x.raw(), dx.raw()}) ? n / Pack<T>::kSize : 0;
    gelu_backward_kernel<T>
        <<<blocks_for(packs > 0 ? packs : n, kThreads), kThreads, 0, stream_of(ec)>>>(
            dptr<const T>(dy), dptr<const T>(x), dptr<T>(dx), n, packs);
    check_launch("gelu_backward");
  });
}

template <>
void swiglu_forward<Backend::cuda>(const ExecContext& ec, const Tensor& gu, Tensor& out) {
  const int64_t n = out.shape().last(), rows = n == 0 ? 0 : out.numel() / n;
  if (rows * n == 0) return;
  dispatch_float(gu.dtype(), "swiglu_forward", [&]<typename T>() {
    swiglu_forward_kernel<T><<<blocks_for(rows * n, kThreads), kThreads, 0, stream_of(ec)>>>(
        dptr<const T>(gu), dptr<T>(out), rows, n);
    check_launch("swiglu_forward");
  });
}

template <>
void swiglu_backward<Backend::cuda>(const ExecContext& ec, const Tensor& dy, const Tensor& gu,
                                    Tensor& dgu) {
  const int64_t n = dy.shape().last(), rows = n == 0 ? 0 : dy.numel() / n;
  if (rows * n == 0) return;
  dispatch_float(gu.dtype(), "swiglu_backward", [&]<typename T>() {
    swiglu_backward_kernel<T><<<blocks_for(rows * n, kThreads), kThreads, 0, stream_of(ec)>>>(
        dptr<const T>(dy), dptr<const T>(gu), dptr<T>(dgu), rows, n);
    check_launch("swiglu_backward");
  });
}

template <>
void bias_add<Backend::cuda>(const ExecContext& ec, Tensor& y, const Tensor& bias) {
  const int64_t n = y.shape().rows(), c = y.shape().last();
  if (n * c == 0) return;
  dispatch_float(y.dtype(), "bias_add", [&]<typename T>() {
    bias_add_kernel<T><<<blocks_for(n * c, kThreads), kThreads, 0, stream_of(ec)>>>(
        dptr<T>(y), dptr<const float>(bias), n, c);
    check_launch("bias_add");
  });
}

template <>
void bias_backward<Backend::cuda>(const ExecContext& ec, const Tensor& dy, Tensor& dbias) {
  const int64_t n = dy.shape().rows(), c = dy.shape().last();
  const int64_t nblocks = (n + kBlockRows - 1) / kBlockRows;
  if (nblocks == 0 || c == 0) return;
  Tensor partial = ec.empty({nblocks, c}, DType::f32);
  dispatch_float(dy.dtype(), "bias_backward", [&]<typename T>() {
    constexpr int W = Pack<T>::kSize;
    if (packs_fit({dy.raw()}) && c % W == 0) {
      column_block_sums_kernel<T, W>
          <<<column_block_grid(c / W, nblocks), kThreads, 0, stream_of(ec)>>>(
              dptr<const T>(dy), dptr<float>(partial), n, c);
    } else {
      column_block_sums_kernel<T, 1><<<column_block_grid(c, nblocks), kThreads, 0, stream_of(ec)>>>(
          dptr<const T>(dy), dptr<float>(partial), n, c);
    }
    check_launch("bias_backward (block sums)");
  });
  add_block_sums_kernel<<<blocks_for(c, kThreads), kThreads, 0, stream_of(ec)>>>(
      dptr<const float>(partial), nblocks, c, dptr<float>(dbias));
  check_launch("bias_backward (block order)");
}

template <>
void add<Backend::cuda>(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t n = a.numel();
  if (n == 0) return;
  dispatch_float(a.dtype(), "add", [&]<typename T>() {
    add_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, stream_of(ec)>>>(
        dptr<const T>(a), dptr<const T>(b), dptr<T>(out), n);
    check_launch("add");
  });
}

template <>
void axpy<Backend::cuda>(const ExecContext& ec, float alpha, const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_float(x.dtype(), "axpy input", [&]<typename TX>() {
    dispatch_float(y.dtype(), "axpy output", [&]<typename TY>() {
      axpy_kernel<TX, TY><<<blocks_for(n, kThreads), kThreads, 0, stream_of(ec)>>>(
          alpha, dptr<const TX>(x), dptr<TY>(y), n);
      check_launch("axpy");
    });
  });
}

template <>
void scale<Backend::cuda>(const ExecContext& ec, Tensor& y, float alpha) {
  const int64_t n = y.numel();
  if (n == 0) return;
  dispatch_float(y.dtype(), "scale", [&]<typename T>() {
    scale_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, stream_of(ec)>>>(dptr<T>(y), alpha, n);
    check_launch("scale");
  });
}

}  // namespace weft::kernels::impl
