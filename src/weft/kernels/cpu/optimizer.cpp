#include "weft/kernels/impl/optimizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "weft/core/exec_context.h"

namespace weft::kernels::impl {

namespace {

// Below this many elements a parallel region costs more than it saves; the
// results do not depend on it.
constexpr int64_t kParallelMin = 1 << 15;

}  // namespace

template <>
void adamw_step<Backend::cpu>(const ExecContext& ec, Tensor& params, const Tensor& grads, Tensor& m,
                              Tensor& v, const AdamWConfig& cfg) {
  const int64_t n = params.numel();

  // Per-step constants in f64, rounded once; the same formulation as PyTorch.
  const double bias1 = 1.0 - std::pow(static_cast<double>(cfg.beta1), cfg.step);
  const double bias2 = 1.0 - std::pow(static_cast<double>(cfg.beta2), cfg.step);
  const float decay = static_cast<float>(1.0 - static_cast<double>(cfg.lr) * cfg.weight_decay);
  const float step_size = static_cast<float>(cfg.lr / bias1);
  const float inv_sqrt_bias2 = static_cast<float>(1.0 / std::sqrt(bias2));
  const float b1 = cfg.beta1, b2 = cfg.beta2, a1 = 1.0f - cfg.beta1, a2 = 1.0f - cfg.beta2;
  const float scale = cfg.grad_scale, eps = cfg.eps;

  float* p = params.data<float>();
  const float* g = grads.data<float>();
  float* mp = m.data<float>();
  float* vp = v.data<float>();
#pragma omp parallel for num_threads(ec.threads()) schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * scale;
    const float mi = b1 * mp[i] + a1 * gi;
    const float vi = b2 * vp[i] + a2 * gi * gi;
    mp[i] = mi;
    vp[i] = vi;
    p[i] = p[i] * decay - step_size * mi / (std::sqrt(vi) * inv_sqrt_bias2 + eps);
  }
}

template <>
double sum_of_squares<Backend::cpu>(const ExecContext& ec, const Tensor& x) {
  const int64_t n = x.numel();
  // Fixed blocks, each summed in a fixed order of 8 lanes, then the block sums
  // added in block order: the same result for any thread count.
  constexpr int64_t kBlock = 1 << 16;
  constexpr int kLanes = 8;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(static_cast<size_t>(blocks));
  const float* p = x.data<float>();
#pragma omp parallel for num_threads(ec.threads()) schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kBlock, end = std::min(n, begin + kBlock);
    double lane[kLanes] = {};
    int64_t i = begin;
    for (; i + kLanes <= end; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        const double xi = p[i + l];
        lane[l] += xi * xi;
      }
    }
    for (int l = 0; i < end; ++i, ++l) {
      const double xi = p[i];
      lane[l] += xi * xi;
    }
    double s = 0.0;
    for (double part : lane) s += part;
    partial[static_cast<size_t>(b)] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

}  // namespace weft::kernels::impl
