#include "weft/kernels/cuda/common.cuh"
#include "weft/kernels/cuda/grid_stride.cuh"
#include "weft/kernels/cuda/philox.cuh"
#include "weft/kernels/elementwise.h"
#include "weft/kernels/impl/norm.h"

namespace weft::kernels::impl {

// The launch and element helpers of kernels/cuda/ (common.cuh and its kin).
using namespace cuda;

namespace {

// Rows per block of the dgamma/dbeta reduction, as the CPU's: each column sums
// a block's rows in row order, then the block sums are added in block order,
// which is exactly the CPU's order.
constexpr int64_t kBlockRows = 64;

// v rounded to T (a no-op for f32), as a store and a load of T give it.
template <typename T>
__device__ __forceinline__ float rounded(float v) {
  T t;
  store_f(&t, 0, v);
  return load_f(&t, 0);
}

// The residual add in front of a norm (impl::ResidualAdd) as device pointers;
// branch null: the norm reads x itself.
template <typename T>
struct DeviceResidual {
  const T* branch = nullptr;
  T* sum = nullptr;
  uint8_t* mask = nullptr;
  float p = 0.0f, scale = 1.0f;
  uint64_t seed = 0, offset = 0;
};

template <typename T>
DeviceResidual<T> device_residual(const ResidualAdd* r) {
  DeviceResidual<T> d;
  if (!r) return d;
  d.branch = dptr<const T>(r->branch);
  d.sum = dptr<T>(r->sum);
  d.p = r->dropout.p;
  d.seed = r->dropout.seed;
  d.offset = r->dropout.offset;
  if (d.p > 0.0f) {
    d.mask = dptr<uint8_t>(r->mask);
    d.scale = 1.0f / (1.0f - d.p);
  }
  return d;
}

// Element i of what the norm reads: x's, or sum = x + dropout(branch) written
// first as dropout_forward and add round it (the thread that writes an
// element of sum is the one that reads it back).
template <typename T>
__device__ __forceinline__ float residual_element(const T* x, const DeviceResidual<T>& res,
                                                  int64_t i) {
  if (!res.branch) return load_f(x, i);
  float b = load_f(res.branch, i);
  if (res.p > 0.0f) {
    const bool keep = uniform_at(res.seed, res.offset, static_cast<uint64_t>(i)) >= res.p;
    res.mask[i] = keep;
    b = rounded<T>(keep ? b * res.scale : 0.0f);
  }
  store_f(res.sum, i, load_f(x, i) + b);
  return load_f(res.sum, i);
}

// x (n, c) [or sum = x + dropout(branch)], gamma (c), beta (c) -> y (n, c),
// mean (n), rstd (n). One block per row: mean, biased variance about the
// mean (two passes, as the CPU), y = (x - mean)·rstd·gamma + beta.
template <typename T>
__global__ void layer_norm_forward_kernel(const T* x, DeviceResidual<T> res, const float* gamma,
                                          const float* beta, float eps, T* y, float* mean,
                                          float* rstd, int64_t n, int64_t c) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
      sum += residual_element(x, res, r * c + j);
    const T* xr = (res.branch ? res.sum : x) + r * c;
    T* yr = y + r * c;
    const float m = block_sum(sum, scratch) / static_cast<float>(c);
    float var = 0.0f;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      const float d = load_f(xr, j) - m;
      var += d * d;
    }
    const float s = 1.0f / sqrtf(block_sum(var, scratch) / static_cast<float>(c) + eps);
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      store_f(yr, j, (load_f(xr, j) - m) * s * gamma[j] + beta[j]);
    }
    if (threadIdx.x == 0) {
      mean[r] = m;
      rstd[r] = s;
    }
  }
}

// The same forward with one warp per row, every access a 16-byte Pack: for
// rows that are 16-byte aligned with c a multiple of the Pack, and a residual
// add without dropout (the common case of a training step; the kernel above
// takes the rest). Each lane sums its Packs, the warp adds the lanes.
template <typename T>
__global__ void layer_norm_forward_warp_kernel(const T* x, const T* branch, T* sum_out,
                                               const float* gamma, const float* beta, float eps,
                                               T* y, float* mean, float* rstd, int64_t n,
                                               int64_t c) {
  constexpr int K = Pack<T>::kSize;
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  const int64_t packs = c / K;
  const float inv_c = 1.0f / static_cast<float>(c);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; r < n;
       r += warps) {
    const int64_t base = r * packs;
    // The row the norm reads: x, or sum = x + branch rounded to T (written here).
    const T* xr = branch ? sum_out : x;
    float sum = 0.0f;
    for (int64_t p = lane; p < packs; p += 32) {
      Pack<T> v = load_pack(x, base + p);
      if (branch) {
        const Pack<T> b = load_pack(branch, base + p);
#pragma unroll
        for (int k = 0; k < K; ++k) store_f(v.v, k, load_f(v.v, k) + load_f(b.v, k));
        store_pack(sum_out, base + p, v);
      }
#pragma unroll
      for (int k = 0; k < K; ++k) sum += load_f(v.v, k);
    }
    const float m = warp_sum(sum) * inv_c;
    float var = 0.0f;
    for (int64_t p = lane; p < packs; p += 32) {
      const Pack<T> v = load_pack(xr, base + p);
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const float d = load_f(v.v, k) - m;
        var += d * d;
      }
    }
    const float s = 1.0f / sqrtf(warp_sum(var) * inv_c + eps);
    for (int64_t p = lane; p < packs; p += 32) {
      const Pack<T> v = load_pack(xr, base + p);
      Pack<T> out;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int64_t j = p * K + k;
        store_f(out.v, k, (load_f(v.v, k) - m) * s * gamma[j] + beta[j]);
      }
      store_pack(y, base + p, out);
    }
    if (lane == 0) {
      mean[r] = m;
      rstd[r] = s;
    }
  }
}

// dy (n, c), x (n, c), gamma (c), mean (n), rstd (n) -> dx (n, c). One block per
// row: dx = s·(dy·g - mean(dy·g) - xhat·mean(dy·g·xhat)).
// The residual gradient of a norm's backward (kernels/norm.h ResidualGrad) as
// device pointers; null fields are not asked for.
template <typename T>
struct DeviceResidualGrad {
  const T* dres = nullptr;
  const uint8_t* mask = nullptr;
  float scale = 1.0f;
  T* dbranch = nullptr;
};

template <typename T>
DeviceResidualGrad<T> device_residual_grad(const ResidualGrad& r) {
  DeviceResidualGrad<T> d;
  if (r.dres) d.dres = dptr<const T>(*r.dres);
  if (r.dbranch) {
    d.dbranch = dptr<T>(*r.dbranch);
    d.mask = dptr<const uint8_t>(*r.mask);
    d.scale = 1.0f / (1.0f - r.p);
  }
  return d;
}

// Stores element i of dx = norm'(dy) (+ dres), and of dbranch = dx·mask/(1-p),
// with the roundings of the separate kernels.
template <typename T>
__device__ __forceinline__ void store_dx(T* dx, const DeviceResidualGrad<T>& res, int64_t i,
                                         float v) {
  if (res.dres) v = load_f(res.dres, i) + rounded<T>(v);
  store_f(dx, i, v);
  if (res.dbranch) store_f(res.dbranch, i, res.mask[i] ? rounded<T>(v) * res.scale : 0.0f);
}

template <typename T>
__global__ void layer_norm_dx_kernel(const T* dy, const T* x, const float* gamma, const float* mean,
                                     const float* rstd, T* dx, DeviceResidualGrad<T> res, int64_t n,
                                     int64_t c) {
  __shared__ float scratch[32];
  const float inv_c = 1.0f / static_cast<float>(c);
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const T* xr = x + r * c;
    const T* dyr = dy + r * c;
    const float m = mean[r], s = rstd[r];
    float sum_dg = 0.0f, sum_dgx = 0.0f;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      const float xhat = (load_f(xr, j) - m) * s;
      const float dg = load_f(dyr, j) * gamma[j];
      sum_dg += dg;
      sum_dgx += dg * xhat;
    }
    sum_dg = block_sum(sum_dg, scratch) * inv_c;
    sum_dgx = block_sum(sum_dgx, scratch) * inv_c;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      const float xhat = (load_f(xr, j) - m) * s;
      store_dx(dx, res, r * c + j, s * (load_f(dyr, j) * gamma[j] - sum_dg - xhat * sum_dgx));
    }
  }
}

// layer_norm_dx_kernel with one warp per row in 16-byte Packs, for aligned
// rows with c a multiple of the Pack and no dropout gradient (dbranch): dx =
// norm'(dy), plus dres where given.
template <typename T>
__global__ void layer_norm_dx_warp_kernel(const T* dy, const T* x, const float* gamma,
                                          const float* mean, const float* rstd, T* dx,
                                          const T* dres, int64_t n, int64_t c) {
  constexpr int K = Pack<T>::kSize;
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  const int64_t packs = c / K;
  const float inv_c = 1.0f / static_cast<float>(c);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; r < n;
       r += warps) {
    const int64_t base = r * packs;
    const float m = mean[r], s = rstd[r];
    float sum_dg = 0.0f, sum_dgx = 0.0f;
    for (int64_t p = lane; p < packs; p += 32) {
      const Pack<T> xv = load_pack(x, base + p), gv = load_pack(dy, base + p);
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const float xhat = (load_f(xv.v, k) - m) * s;
        const float dg = load_f(gv.v, k) * gamma[p * K + k];
        sum_dg += dg;
        sum_dgx += dg * xhat;
      }
    }
    sum_dg = warp_sum(sum_dg) * inv_c;
    sum_dgx = warp_sum(sum_dgx) * inv_c;
    for (int64_t p = lane; p < packs; p += 32) {
      const Pack<T> xv = load_pack(x, base + p), gv = load_pack(dy, base + p);
      Pack<T> out;
      if (dres) out = load_pack(dres, base + p);
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const float xhat = (load_f(xv.v, k) - m) * s;
        float v = s * (load_f(gv.v, k) * gamma[p * K + k] - sum_dg - xhat * sum_dgx);
        if (dres) v = load_f(out.v, k) + rounded<T>(v);
        store_f(out.v, k, v);
      }
      store_pack(dx, base + p, out);
    }
  }
}

// partial[b, 0, j] = Σ dy·xhat and partial[b, 1, j] = Σ dy over the rows of
// block b, in row order; products rounded before each add (the CPU's loop has
// no FMA), so the sums are the CPU's bit for bit. A thread owns W consecutive
// columns (W = one Pack when the rows are 16-byte aligned, else 1): the same
// sums, wider loads.
template <typename T, int W>
__global__ void layer_norm_param_blocks_kernel(const T* dy, const T* x, const float* mean,
                                               const float* rstd, float* partial, int64_t n,
                                               int64_t c) {
  const int64_t j = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * W;
  if (j >= c) return;
  const int64_t nblocks = (n + kBlockRows - 1) / kBlockRows;
  for (int64_t b = blockIdx.y; b < nblocks; b += gridDim.y) {
    const int64_t end = min(n, (b + 1) * kBlockRows);
    float pg[W], pb[W];
#pragma unroll
    for (int k = 0; k < W; ++k) pg[k] = pb[k] = 0.0f;
#pragma unroll 8
    for (int64_t r = b * kBlockRows; r < end; ++r) {
      const float m = mean[r], s = rstd[r];
      if constexpr (W == 1) {
        const float xhat = __fmul_rn(__fsub_rn(load_f(x, r * c + j), m), s);
        const float d = load_f(dy, r * c + j);
        pg[0] = __fadd_rn(pg[0], __fmul_rn(d, xhat));
        pb[0] = __fadd_rn(pb[0], d);
      } else {
        const Pack<T> xs = load_pack(x, (r * c + j) / W), ds = load_pack(dy, (r * c + j) / W);
#pragma unroll
        for (int k = 0; k < W; ++k) {
          const float xhat = __fmul_rn(__fsub_rn(load_f(xs.v, k), m), s);
          const float d = load_f(ds.v, k);
          pg[k] = __fadd_rn(pg[k], __fmul_rn(d, xhat));
          pb[k] = __fadd_rn(pb[k], d);
        }
      }
    }
#pragma unroll
    for (int k = 0; k < W; ++k) {
      partial[b * 2 * c + j + k] = pg[k];
      partial[b * 2 * c + c + j + k] = pb[k];
    }
  }
}

// partial (nblocks, parts, c) -> out0 (c), out1 (c): out_k[j] += partial[b, k, j] for b = 0, 1, ...
// in order (k < `parts`).
__global__ void add_param_blocks_kernel(const float* partial, int64_t nblocks, int64_t c, int parts,
                                        float* out0, float* out1) {
  for (int64_t j = grid_start(); j < c; j += grid_stride()) {
    float a0 = out0[j];
    float a1 = parts > 1 ? out1[j] : 0.0f;
    // Loads 8 blocks ahead of their adds (latency-bound: one thread per
    // column); the adds keep block order.
    int64_t b = 0;
    for (; b + 8 <= nblocks; b += 8) {
      float v0[8], v1[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        v0[k] = partial[(b + k) * parts * c + j];
        v1[k] = parts > 1 ? partial[(b + k) * parts * c + c + j] : 0.0f;
      }
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        a0 += v0[k];
        if (parts > 1) a1 += v1[k];
      }
    }
    for (; b < nblocks; ++b) {
      a0 += partial[b * parts * c + j];
      if (parts > 1) a1 += partial[b * parts * c + c + j];
    }
    out0[j] = a0;
    if (parts > 1) out1[j] = a1;
  }
}

// x (n, c) [or sum = x + dropout(branch)], gamma (c) -> y (n, c), rstd (n).
// One block per row.
template <typename T>
__global__ void rms_norm_forward_kernel(const T* x, DeviceResidual<T> res, const float* gamma,
                                        float eps, T* y, float* rstd, int64_t n, int64_t c) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    float ss = 0.0f;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      const float v = residual_element(x, res, r * c + j);
      ss += v * v;
    }
    const T* xr = (res.branch ? res.sum : x) + r * c;
    T* yr = y + r * c;
    const float s = 1.0f / sqrtf(block_sum(ss, scratch) / static_cast<float>(c) + eps);
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      store_f(yr, j, load_f(xr, j) * s * gamma[j]);
    }
    if (threadIdx.x == 0) rstd[r] = s;
  }
}

// dy (n, c), x (n, c), gamma (c), rstd (n) -> dx (n, c). One block per row:
// dx = s·(dy·g - xhat·mean(dy·g·xhat)).
template <typename T>
__global__ void rms_norm_dx_kernel(const T* dy, const T* x, const float* gamma, const float* rstd,
                                   T* dx, DeviceResidualGrad<T> res, int64_t n, int64_t c) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
    const T* xr = x + r * c;
    const T* dyr = dy + r * c;
    const float s = rstd[r];
    float sum_dgx = 0.0f;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      sum_dgx += load_f(dyr, j) * gamma[j] * (load_f(xr, j) * s);
    }
    sum_dgx = block_sum(sum_dgx, scratch) / static_cast<float>(c);
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      const float xhat = load_f(xr, j) * s;
      store_dx(dx, res, r * c + j, s * (load_f(dyr, j) * gamma[j] - xhat * sum_dgx));
    }
  }
}

// partial[b, j] = Σ dy·xhat over the rows of block b, in row order (as the CPU).
template <typename T>
__global__ void rms_norm_param_blocks_kernel(const T* dy, const T* x, const float* rstd,
                                             float* partial, int64_t n, int64_t c) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= c) return;
  const int64_t nblocks = (n + kBlockRows - 1) / kBlockRows;
  for (int64_t b = blockIdx.y; b < nblocks; b += gridDim.y) {
    const int64_t end = min(n, (b + 1) * kBlockRows);
    float pg = 0.0f;
    for (int64_t r = b * kBlockRows; r < end; ++r) {
      const float xhat = __fmul_rn(load_f(x, r * c + j), rstd[r]);
      pg = __fadd_rn(pg, __fmul_rn(load_f(dy, r * c + j), xhat));
    }
    partial[b * c + j] = pg;
  }
}

}  // namespace

template <>
void layer_norm_forward<Backend::cuda>(const ExecContext& ec, const Tensor& x,
                                       const ResidualAdd* residual, const Tensor& gamma,
                                       const Tensor& beta, float eps, Tensor& y, Tensor& mean,
                                       Tensor& rstd) {
  const int64_t n = x.shape().rows(), c = x.shape().last();
  if (n == 0 || c == 0) return;
  dispatch_float(x.dtype(), "layer_norm_forward", [&]<typename T>() {
    const bool dropout = residual && residual->dropout.p > 0.0f;
    if (!dropout && c % Pack<T>::kSize == 0 &&
        packs_fit({x.raw(), y.raw(), residual ? residual->branch.raw() : nullptr,
                   residual ? residual->sum.raw() : nullptr})) {
      constexpr int kWarps = kThreads / 32;
      layer_norm_forward_warp_kernel<T>
          <<<row_blocks((n + kWarps - 1) / kWarps), kThreads, 0, stream_of(ec)>>>(
              dptr<const T>(x), residual ? dptr<const T>(residual->branch) : nullptr,
              residual ? dptr<T>(residual->sum) : nullptr, dptr<const float>(gamma),
              dptr<const float>(beta), eps, dptr<T>(y), dptr<float>(mean), dptr<float>(rstd), n, c);
      check_launch("layer_norm_forward");
      return;
    }
    layer_norm_forward_kernel<T><<<row_blocks(n), kThreads, 0, stream_of(ec)>>>(
        dptr<const T>(x), device_residual<T>(residual), dptr<const float>(gamma),
        dptr<const float>(beta), eps, dptr<T>(y), dptr<float>(mean), dptr<float>(rstd), n, c);
    check_launch("layer_norm_forward");
  });
}

template <>
void layer_norm_backward<Backend::cuda>(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                                        const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                                        Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                                        const ResidualGrad& residual) {
  const int64_t n = x.shape().rows(), c = x.shape().last();
  if (n == 0 || c == 0) return;
  const int64_t nblocks = (n + kBlockRows - 1) / kBlockRows;
  Tensor partial = ec.empty({nblocks, 2, c}, DType::f32);
  dispatch_float(x.dtype(), "layer_norm_backward", [&]<typename T>() {
    if (!residual.dbranch && c % Pack<T>::kSize == 0 &&
        packs_fit({dy.raw(), x.raw(), dx.raw(), residual.dres ? residual.dres->raw() : nullptr})) {
      constexpr int kWarps = kThreads / 32;
      layer_norm_dx_warp_kernel<T>
          <<<row_blocks((n + kWarps - 1) / kWarps), kThreads, 0, stream_of(ec)>>>(
              dptr<const T>(dy), dptr<const T>(x), dptr<const float>(gamma),
              dptr<const float>(mean), dptr<const float>(rstd), dptr<T>(dx),
              residual.dres ? dptr<const T>(*residual.dres) : nullptr, n, c);
    } else {
      layer_norm_dx_kernel<T><<<row_blocks(n), kThreads, 0, stream_of(ec)>>>(
          dptr<const T>(dy), dptr<const T>(x), dptr<const float>(gamma), dptr<const float>(mean),
          dptr<const float>(rstd), dptr<T>(dx), device_residual_grad<T>(residual), n, c);
    }
    check_launch("layer_norm_backward (dx)");
    constexpr int W = Pack<T>::kSize;
    if (packs_fit({dy.raw(), x.raw()}) && c % W == 0) {
      layer_norm_param_blocks_kernel<T, W>
          <<<column_block_grid(c / W, nblocks), kThreads, 0, stream_of(ec)>>>(
              dptr<const T>(dy), dptr<const T>(x), dptr<const float>(mean), dptr<const float>(rstd),
              dptr<float>(partial), n, c);
    } else {
      layer_norm_param_blocks_kernel<T, 1>
          <<<column_block_grid(c, nblocks), kThreads, 0, stream_of(ec)>>>(
              dptr<const T>(dy), dptr<const T>(x), dptr<const float>(mean), dptr<const float>(rstd),
              dptr<float>(partial), n, c);
    }
    check_launch("layer_norm_backward (block sums)");
  });
  add_param_blocks_kernel<<<blocks_for(c, kThreads), kThreads, 0, stream_of(ec)>>>(
      dptr<const float>(partial), nblocks, c, 2, dptr<float>(dgamma), dptr<float>(dbeta));
  check_launch("layer_norm_backward (block order)");
}

template <>
void rms_norm_forward<Backend::cuda>(const ExecContext& ec, const Tensor& x,
                                     const ResidualAdd* residual, const Tensor& gamma, float eps,
                                     Tensor& y, Tensor& rstd) {
  const int64_t n = x.shape().rows(), c = x.shape().last();
  if (n == 0 || c == 0) return;
  dispatch_float(x.dtype(), "rms_norm_forward", [&]<typename T>() {
    rms_norm_forward_kernel<T><<<row_blocks(n), kThreads, 0, stream_of(ec)>>>(
        dptr<const T>(x), device_residual<T>(residual), dptr<const float>(gamma), eps, dptr<T>(y),
        dptr<float>(rstd), n, c);
    check_launch("rms_norm_forward");
  });
}

template <>
void rms_norm_backward<Backend::cuda>(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                                      const Tensor& gamma, const Tensor& rstd, Tensor& dx,
                                      Tensor& dgamma, const ResidualGrad& residual) {
  const int64_t n = x.shape().rows(), c = x.shape().last();
  if (n == 0 || c == 0) return;
  const int64_t nblocks = (n + kBlockRows - 1) / kBlockRows;
  Tensor partial = ec.empty({nblocks, c}, DType::f32);
  dispatch_float(x.dtype(), "rms_norm_backward", [&]<typename T>() {
    rms_norm_dx_kernel<T><<<row_blocks(n), kThreads, 0, stream_of(ec)>>>(
        dptr<const T>(dy), dptr<const T>(x), dptr<const float>(gamma), dptr<const float>(rstd),
        dptr<T>(dx), device_residual_grad<T>(residual), n, c);
    check_launch("rms_norm_backward (dx)");
    rms_norm_param_blocks_kernel<T><<<column_block_grid(c, nblocks), kThreads, 0, stream_of(ec)>>>(
        dptr<const T>(dy), dptr<const T>(x), dptr<const float>(rstd), dptr<float>(partial), n, c);
    check_launch("rms_norm_backward (block sums)");
  });
  add_param_blocks_kernel<<<blocks_for(c, kThreads), kThreads, 0, stream_of(ec)>>>(
      dptr<const float>(partial), nblocks, c, 1, dptr<float>(dgamma), nullptr);
  check_launch("rms_norm_backward (block order)");
}

}  // namespace weft::kernels::impl
