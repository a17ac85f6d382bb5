#include "weft/kernels/impl/norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "weft/core/exec_context.h"
#include "weft/kernels/cpu/clones.h"
#include "weft/kernels/elementwise.h"
#include "weft/kernels/random.h"

// This file is compiled with -ffp-contract=off (CMakeLists.txt): no product is
// fused into an add, so the dgamma/dbeta block sums are the CUDA kernels' bit
// for bit, and a clone for any instruction set computes what the others do.

namespace weft::kernels::impl {

namespace {

using detail::BF16;
using detail::from_f32;
using detail::ptr;
using detail::to_f32;

#define WEFT_INLINE [[gnu::always_inline]] inline

// Rows per block of the dgamma/dbeta reduction. Fixed, so the summation order
// (within a block, then block by block) does not depend on the thread count.
constexpr int64_t kBlockRows = 64;

// A row's sums run in 16 lanes (element j into lane j mod 16) that are added
// pairwise at the end: one vector of AVX-512 or two of AVX2, the same order
// on both (and in the baseline build), so the statistics do not depend on the
// processor the clone was picked for.
constexpr int kLanes = 16;

WEFT_INLINE float fold_lanes(float* acc) {
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
  return acc[0];
}

// Σ f(j) over j < n.
template <typename F>
WEFT_INLINE float lane_sum(int64_t n, F&& f) {
  float acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += f(j + l);
  for (int l = 0; j + l < n; ++l) acc[l] += f(j + l);
  return fold_lanes(acc);
}

// Two sums at once: f(j, a, b) adds element j's terms to a and b.
template <typename F>
WEFT_INLINE void lane_sums(int64_t n, F&& f, float& sum_a, float& sum_b) {
  float a[kLanes] = {}, b[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) f(j + l, a[l], b[l]);
  for (int l = 0; j + l < n; ++l) f(j + l, a[l], b[l]);
  sum_a = fold_lanes(a);
  sum_b = fold_lanes(b);
}

// What the forward kernels read and write, as typed pointers. branch null:
// the norm of x; otherwise of sum = x + dropout(branch), written first.
template <typename T>
struct Forward {
  const T* x;
  const T* branch;
  T* sum;
  uint8_t* mask;
  ResidualDropout dropout;
  const float* gamma;
  const float* beta;  // null for RMSNorm
  float eps;
  T* y;
  float* mean;  // null for RMSNorm
  float* rstd;
  int64_t n, c;
};

// Row r of what the norm reads: x's, or sum's once written as dropout_forward
// and add would (each result rounded to T).
template <typename T>
WEFT_INLINE const T* residual_row(const Forward<T>& a, int64_t r) {
  const int64_t c = a.c;
  const T* x = a.x + r * c;
  if (!a.branch) return x;
  const T* b = a.branch + r * c;
  T* s = a.sum + r * c;
  const float p = a.dropout.p;
  if (p > 0.0f) {
    const float scale = 1.0f / (1.0f - p);
    uint8_t* m = a.mask + r * c;
    const int64_t row = a.dropout.rows.stream_row(r);
    for_each_uniform(a.dropout.seed, a.dropout.offset + static_cast<uint64_t>(row * c), c,
                     [&](int64_t j, float u) {
                       const bool keep = u >= p;
                       m[j] = keep;
                       const T kept = from_f32<T>(keep ? to_f32(b[j]) * scale : 0.0f);
                       s[j] = from_f32<T>(to_f32(x[j]) + to_f32(kept));
                     });
  } else {
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) s[j] = from_f32<T>(to_f32(x[j]) + to_f32(b[j]));
  }
  return s;
}

// y = (x - mean)·rstd·gamma + beta over one row; mean about the row's mean
// (two passes).
template <typename T>
WEFT_INLINE void layer_norm_row(const Forward<T>& a, int64_t r) {
  const int64_t c = a.c;
  const T* x = residual_row(a, r);
  T* y = a.y + r * c;
  const float* g = a.gamma;
  const float* bt = a.beta;
  const float m = lane_sum(c, [&](int64_t j) { return to_f32(x[j]); }) / static_cast<float>(c);
  const float var = lane_sum(c, [&](int64_t j) {
    const float d = to_f32(x[j]) - m;
    return d * d;
  });
  const float s = 1.0f / std::sqrt(var / static_cast<float>(c) + a.eps);
#pragma omp simd
  for (int64_t j = 0; j < c; ++j) y[j] = from_f32<T>((to_f32(x[j]) - m) * s * g[j] + bt[j]);
  a.mean[r] = m;
  a.rstd[r] = s;
}

// y = x·rstd·gamma, rstd = 1/sqrt(mean(x²) + eps) over one row.
template <typename T>
WEFT_INLINE void rms_norm_row(const Forward<T>& a, int64_t r) {
  const int64_t c = a.c;
  const T* x = residual_row(a, r);
  T* y = a.y + r * c;
  const float* g = a.gamma;
  const float ss = lane_sum(c, [&](int64_t j) { return to_f32(x[j]) * to_f32(x[j]); });
  const float s = 1.0f / std::sqrt(ss / static_cast<float>(c) + a.eps);
#pragma omp simd
  for (int64_t j = 0; j < c; ++j) y[j] = from_f32<T>(to_f32(x[j]) * s * g[j]);
  a.rstd[r] = s;
}

// What the backward kernels read and write. The residual fields are null
// when not asked for (ResidualGrad).
template <typename T>
struct Backward {
  const T* dy;
  const T* x;
  const float* gamma;
  const float* mean;  // null for RMSNorm
  const float* rstd;
  T* dx;
  const T* dres;
  const uint8_t* mask;
  float keep_scale;
  T* dbranch;
  float* partial;  // per block: dgamma's sums, then (LayerNorm) dbeta's
  int64_t n, c;
};

// dx += dres, then dbranch = dx·mask/(1-p), over row r of dx as written.
template <typename T>
WEFT_INLINE void residual_grad_row(const Backward<T>& a, int64_t r) {
  const int64_t c = a.c;
  T* dx = a.dx + r * c;
  if (a.dres) {
    const T* dres = a.dres + r * c;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) dx[j] = from_f32<T>(to_f32(dres[j]) + to_f32(dx[j]));
  }
  if (a.dbranch) {
    const uint8_t* m = a.mask + r * c;
    T* db = a.dbranch + r * c;
    const float scale = a.keep_scale;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) db[j] = from_f32<T>(m[j] ? to_f32(dx[j]) * scale : 0.0f);
  }
}

// dx = s·(dy·g - mean(dy·g) - xhat·mean(dy·g·xhat)) over row r, adding its
// dgamma and dbeta terms to the block's sums pg and pb column by column.
template <typename T>
WEFT_INLINE void layer_norm_grad_row(const Backward<T>& a, int64_t r, float* pg, float* pb) {
  const int64_t c = a.c;
  const T* x = a.x + r * c;
  const T* dy = a.dy + r * c;
  T* dx = a.dx + r * c;
  const float* g = a.gamma;
  const float m = a.mean[r], s = a.rstd[r];
  float sum_dg = 0.0f, sum_dgx = 0.0f;
  lane_sums(
      c,
      [&](int64_t j, float& u, float& v) {
        const float xhat = (to_f32(x[j]) - m) * s;
        const float dg = to_f32(dy[j]) * g[j];
        u += dg;
        v += dg * xhat;
      },
      sum_dg, sum_dgx);
#pragma omp simd
  for (int64_t j = 0; j < c; ++j) {
    const float xhat = (to_f32(x[j]) - m) * s;
    const float d = to_f32(dy[j]);
    pg[j] += d * xhat;
    pb[j] += d;
  }
  const float inv_c = 1.0f / static_cast<float>(c);
  sum_dg *= inv_c;
  sum_dgx *= inv_c;
#pragma omp simd
  for (int64_t j = 0; j < c; ++j) {
    const float xhat = (to_f32(x[j]) - m) * s;
    dx[j] = from_f32<T>(s * (to_f32(dy[j]) * g[j] - sum_dg - xhat * sum_dgx));
  }
  residual_grad_row(a, r);
}

// dx = s·(dy·g - xhat·mean(dy·g·xhat)) over row r, adding its dgamma terms to pg.
template <typename T>
WEFT_INLINE void rms_norm_grad_row(const Backward<T>& a, int64_t r, float* pg) {
  const int64_t c = a.c;
  const T* x = a.x + r * c;
  const T* dy = a.dy + r * c;
  T* dx = a.dx + r * c;
  const float* g = a.gamma;
  const float s = a.rstd[r];
  const float sum_dgx = lane_sum(c,
                                 [&](int64_t j) {
                                   const float xhat = to_f32(x[j]) * s;
                                   return to_f32(dy[j]) * g[j] * xhat;
                                 }) /
                        static_cast<float>(c);
#pragma omp simd
  for (int64_t j = 0; j < c; ++j) pg[j] += to_f32(dy[j]) * (to_f32(x[j]) * s);
#pragma omp simd
  for (int64_t j = 0; j < c; ++j) {
    const float xhat = to_f32(x[j]) * s;
    dx[j] = from_f32<T>(s * (to_f32(dy[j]) * g[j] - xhat * sum_dgx));
  }
  residual_grad_row(a, r);
}

// Block b of 64 rows: its rows' gradients and its dgamma (and dbeta) sums.
template <typename T>
WEFT_INLINE void layer_norm_grad_block(const Backward<T>& a, int64_t b) {
  float* pg = a.partial + b * 2 * a.c;
  float* pb = pg + a.c;
  std::fill(pg, pg + 2 * a.c, 0.0f);
  for (int64_t r = b * kBlockRows; r < std::min(a.n, (b + 1) * kBlockRows); ++r) {
    layer_norm_grad_row(a, r, pg, pb);
  }
}

template <typename T>
WEFT_INLINE void rms_norm_grad_block(const Backward<T>& a, int64_t b) {
  float* pg = a.partial + b * a.c;
  std::fill(pg, pg + a.c, 0.0f);
  for (int64_t r = b * kBlockRows; r < std::min(a.n, (b + 1) * kBlockRows); ++r) {
    rms_norm_grad_row(a, r, pg);
  }
}

// The row and block loops, compiled for AVX-512, AVX2 and the baseline
// (cpu/clones.h), one per kernel and storage type.
WEFT_ROW_CLONES void layer_norm_rows(const Forward<float>& a, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t r = 0; r < a.n; ++r) layer_norm_row(a, r);
}
WEFT_ROW_CLONES void layer_norm_rows(const Forward<BF16>& a, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t r = 0; r < a.n; ++r) layer_norm_row(a, r);
}
WEFT_ROW_CLONES void rms_norm_rows(const Forward<float>& a, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t r = 0; r < a.n; ++r) rms_norm_row(a, r);
}
WEFT_ROW_CLONES void rms_norm_rows(const Forward<BF16>& a, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t r = 0; r < a.n; ++r) rms_norm_row(a, r);
}
WEFT_ROW_CLONES void layer_norm_grad_blocks(const Backward<float>& a, int64_t nblocks,
                                            int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t b = 0; b < nblocks; ++b) layer_norm_grad_block(a, b);
}
WEFT_ROW_CLONES void layer_norm_grad_blocks(const Backward<BF16>& a, int64_t nblocks, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t b = 0; b < nblocks; ++b) layer_norm_grad_block(a, b);
}
WEFT_ROW_CLONES void rms_norm_grad_blocks(const Backward<float>& a, int64_t nblocks, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t b = 0; b < nblocks; ++b) rms_norm_grad_block(a, b);
}
WEFT_ROW_CLONES void rms_norm_grad_blocks(const Backward<BF16>& a, int64_t nblocks, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t b = 0; b < nblocks; ++b) rms_norm_grad_block(a, b);
}

#undef WEFT_INLINE

std::vector<float>& scratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf;
}

// Adds the per-block partial sums (nblocks x parts x width) into out0 (and
// out1), block by block.
void reduce_blocks(const float* partial, int64_t nblocks, int64_t width, int parts, float* out0,
                   float* out1) {
  for (int64_t b = 0; b < nblocks; ++b) {
    for (int64_t j = 0; j < width; ++j) {
      out0[j] += partial[b * parts * width + j];
      if (parts > 1) out1[j] += partial[b * parts * width + width + j];
    }
  }
}

template <typename T>
Forward<T> forward_args(const Tensor& x, const ResidualAdd* residual, const Tensor& gamma,
                        float eps, Tensor& y, Tensor& rstd) {
  Forward<T> a{};
  a.x = ptr<T>(x);
  if (residual) {
    a.branch = ptr<T>(residual->branch);
    a.sum = ptr<T>(residual->sum);
    a.dropout = residual->dropout;
    if (a.dropout.p > 0.0f) a.mask = residual->mask.data<uint8_t>();
  }
  a.gamma = gamma.data<float>();
  a.eps = eps;
  a.y = ptr<T>(y);
  a.rstd = rstd.data<float>();
  a.n = x.shape().rows();
  a.c = x.shape().last();
  return a;
}

template <typename T>
Backward<T> backward_args(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                          const Tensor& rstd, Tensor& dx, const ResidualGrad& residual) {
  Backward<T> a{};
  a.dy = ptr<T>(dy);
  a.x = ptr<T>(x);
  a.gamma = gamma.data<float>();
  a.rstd = rstd.data<float>();
  a.dx = ptr<T>(dx);
  if (residual.dres) a.dres = ptr<T>(*residual.dres);
  if (residual.dbranch) {
    a.dbranch = ptr<T>(*residual.dbranch);
    a.mask = residual.mask->data<uint8_t>();
    a.keep_scale = 1.0f / (1.0f - residual.p);
  }
  a.n = x.shape().rows();
  a.c = x.shape().last();
  return a;
}

}  // namespace

template <>
void layer_norm_forward<Backend::cpu>(const ExecContext& ec, const Tensor& x,
                                      const ResidualAdd* residual, const Tensor& gamma,
                                      const Tensor& beta, float eps, Tensor& y, Tensor& mean,
                                      Tensor& rstd) {
  detail::dispatch_float(x.dtype(), [&]<typename T>() {
    Forward<T> a = forward_args<T>(x, residual, gamma, eps, y, rstd);
    a.beta = beta.data<float>();
    a.mean = mean.data<float>();
    layer_norm_rows(a, ec.threads());
  });
}

template <>
void layer_norm_backward<Backend::cpu>(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                                       const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                                       Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                                       const ResidualGrad& residual) {
  const int64_t n = x.shape().rows(), c = x.shape().last();
  const int64_t nblocks = (n + kBlockRows - 1) / kBlockRows;
  std::vector<float>& part = scratch(static_cast<size_t>(nblocks * 2 * c));
  detail::dispatch_float(x.dtype(), [&]<typename T>() {
    Backward<T> a = backward_args<T>(dy, x, gamma, rstd, dx, residual);
    a.mean = mean.data<float>();
    a.partial = part.data();
    layer_norm_grad_blocks(a, nblocks, ec.threads());
  });
  reduce_blocks(part.data(), nblocks, c, 2, dgamma.data<float>(), dbeta.data<float>());
}

template <>
void rms_norm_forward<Backend::cpu>(const ExecContext& ec, const Tensor& x,
                                    const ResidualAdd* residual, const Tensor& gamma, float eps,
                                    Tensor& y, Tensor& rstd) {
  detail::dispatch_float(x.dtype(), [&]<typename T>() {
    rms_norm_rows(forward_args<T>(x, residual, gamma, eps, y, rstd), ec.threads());
  });
}

template <>
void rms_norm_backward<Backend::cpu>(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                                     const Tensor& gamma, const Tensor& rstd, Tensor& dx,
                                     Tensor& dgamma, const ResidualGrad& residual) {
  const int64_t n = x.shape().rows(), c = x.shape().last();
  const int64_t nblocks = (n + kBlockRows - 1) / kBlockRows;
  std::vector<float>& part = scratch(static_cast<size_t>(nblocks * c));
  detail::dispatch_float(x.dtype(), [&]<typename T>() {
    Backward<T> a = backward_args<T>(dy, x, gamma, rstd, dx, residual);
    a.partial = part.data();
    rms_norm_grad_blocks(a, nblocks, ec.threads());
  });
  reduce_blocks(part.data(), nblocks, c, 1, dgamma.data<float>(), nullptr);
}

}  // namespace weft::kernels::impl
