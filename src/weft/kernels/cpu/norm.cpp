#include "weft/kernels/impl/norm.h"

#include <cmath>
#include <vector>

#include "weft/core/exec_context.h"
#include "weft/kernels/elementwise.h"

namespace weft::kernels::impl {

namespace {

using detail::BF16;
using detail::from_f32;
using detail::ptr;
using detail::to_f32;

// Rows per block of the dgamma/dbeta reduction. Fixed, so the summation order
// (within a block, then block by block) does not depend on the thread count.
constexpr int64_t kBlockRows = 64;

std::vector<float>& scratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf;
}

// Adds the per-block partial sums (nblocks x width) into out, block by block.
void reduce_blocks(const float* partial, int64_t nblocks, int64_t width, float* out) {
  for (int64_t b = 0; b < nblocks; ++b)
    for (int64_t j = 0; j < width; ++j) out[j] += partial[b * width + j];
}

}  // namespace

template <>
void layer_norm_forward<Backend::cpu>(const ExecContext& ec, const Tensor& x, const Tensor& gamma,
                                      const Tensor& beta, float eps, Tensor& y, Tensor& mean,
                                      Tensor& rstd) {
  const int64_t n = x.shape().rows(), c = x.shape().last();
  const float* g = gamma.data<float>();
  const float* bt = beta.data<float>();
  float* mu = mean.data<float>();
  float* rs = rstd.data<float>();
  detail::dispatch_float(x.dtype(), [&]<typename T>() {
    const T* xp = ptr<T>(x);
    T* yp = ptr<T>(y);
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
    for (int64_t r = 0; r < n; ++r) {
      const T* xr = xp + r * c;
      T* yr = yp + r * c;
      float sum = 0.f;
      for (int64_t j = 0; j < c; ++j) sum += to_f32(xr[j]);
      float m = sum / static_cast<float>(c);
      float var = 0.f;
      for (int64_t j = 0; j < c; ++j) {
        float d = to_f32(xr[j]) - m;
        var += d * d;
      }
      float s = 1.0f / std::sqrt(var / static_cast<float>(c) + eps);
      for (int64_t j = 0; j < c; ++j) yr[j] = from_f32<T>((to_f32(xr[j]) - m) * s * g[j] + bt[j]);
      mu[r] = m;
      rs[r] = s;
    }
  });
}

template <>
void layer_norm_backward<Backend::cpu>(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                                       const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                                       Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const int64_t n = x.shape().rows(), c = x.shape().last();
  const float* g = gamma.data<float>();
  const float* mu = mean.data<float>();
  const float* rs = rstd.data<float>();
  const int64_t nblocks = (n + kBlockRows - 1) / kBlockRows;
  std::vector<float>& part = scratch(static_cast<size_t>(nblocks * 2 * c));
  float* partial = part.data();
  detail::dispatch_float(x.dtype(), [&]<typename T>() {
    const T* xp = ptr<T>(x);
    const T* dyp = ptr<T>(dy);
    T* dxp = ptr<T>(dx);
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
    for (int64_t b = 0; b < nblocks; ++b) {
      float* pg = partial + b * 2 * c;
      float* pb = pg + c;
      for (int64_t j = 0; j < 2 * c; ++j) pg[j] = 0.f;
      for (int64_t r = b * kBlockRows; r < std::min(n, (b + 1) * kBlockRows); ++r) {
        const T* xr = xp + r * c;
        const T* dyr = dyp + r * c;
        T* dxr = dxp + r * c;
        const float m = mu[r], s = rs[r];
        // dx = s * (dy·g - mean(dy·g) - xhat * mean(dy·g·xhat))
        float sum_dg = 0.f, sum_dgx = 0.f;
        for (int64_t j = 0; j < c; ++j) {
          float xhat = (to_f32(xr[j]) - m) * s;
          float d = to_f32(dyr[j]);
          float dg = d * g[j];
          sum_dg += dg;
          sum_dgx += dg * xhat;
          pg[j] += d * xhat;
          pb[j] += d;
        }
        const float inv_c = 1.0f / static_cast<float>(c);
        sum_dg *= inv_c;
        sum_dgx *= inv_c;
        for (int64_t j = 0; j < c; ++j) {
          float xhat = (to_f32(xr[j]) - m) * s;
          dxr[j] = from_f32<T>(s * (to_f32(dyr[j]) * g[j] - sum_dg - xhat * sum_dgx));
        }
      }
    }
  });
  float* dg = dgamma.data<float>();
  float* db = dbeta.data<float>();
  for (int64_t b = 0; b < nblocks; ++b) {
    for (int64_t j = 0; j < c; ++j) {
      dg[j] += partial[b * 2 * c + j];
      db[j] += partial[b * 2 * c + c + j];
    }
  }
}

template <>
void rms_norm_forward<Backend::cpu>(const ExecContext& ec, const Tensor& x, const Tensor& gamma,
                                    float eps, Tensor& y, Tensor& rstd) {
  const int64_t n = x.shape().rows(), c = x.shape().last();
  const float* g = gamma.data<float>();
  float* rs = rstd.data<float>();
  detail::dispatch_float(x.dtype(), [&]<typename T>() {
    const T* xp = ptr<T>(x);
    T* yp = ptr<T>(y);
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
    for (int64_t r = 0; r < n; ++r) {
      const T* xr = xp + r * c;
      T* yr = yp + r * c;
      float ss = 0.f;
      for (int64_t j = 0; j < c; ++j) ss += to_f32(xr[j]) * to_f32(xr[j]);
      float s = 1.0f / std::sqrt(ss / static_cast<float>(c) + eps);
      for (int64_t j = 0; j < c; ++j) yr[j] = from_f32<T>(to_f32(xr[j]) * s * g[j]);
      rs[r] = s;
    }
  });
}

template <>
void rms_norm_backward<Backend::cpu>(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                                     const Tensor& gamma, const Tensor& rstd, Tensor& dx,
                                     Tensor& dgamma) {
  const int64_t n = x.shape().rows(), c = x.shape().last();
  const float* g = gamma.data<float>();
  const float* rs = rstd.data<float>();
  const int64_t nblocks = (n + kBlockRows - 1) / kBlockRows;
  std::vector<float>& part = scratch(static_cast<size_t>(nblocks * c));
  float* partial = part.data();
  detail::dispatch_float(x.dtype(), [&]<typename T>() {
    const T* xp = ptr<T>(x);
    const T* dyp = ptr<T>(dy);
    T* dxp = ptr<T>(dx);
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
    for (int64_t b = 0; b < nblocks; ++b) {
      float* pg = partial + b * c;
      for (int64_t j = 0; j < c; ++j) pg[j] = 0.f;
      for (int64_t r = b * kBlockRows; r < std::min(n, (b + 1) * kBlockRows); ++r) {
        const T* xr = xp + r * c;
        const T* dyr = dyp + r * c;
        T* dxr = dxp + r * c;
        const float s = rs[r];
        // dx = s * (dy·g - xhat * mean(dy·g·xhat))
        float sum_dgx = 0.f;
        for (int64_t j = 0; j < c; ++j) {
          float xhat = to_f32(xr[j]) * s;
          float d = to_f32(dyr[j]);
          sum_dgx += d * g[j] * xhat;
          pg[j] += d * xhat;
        }
        sum_dgx /= static_cast<float>(c);
        for (int64_t j = 0; j < c; ++j) {
          float xhat = to_f32(xr[j]) * s;
          dxr[j] = from_f32<T>(s * (to_f32(dyr[j]) * g[j] - xhat * sum_dgx));
        }
      }
    }
  });
  reduce_blocks(partial, nblocks, c, dgamma.data<float>());
}

}  // namespace weft::kernels::impl
