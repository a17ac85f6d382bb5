// The implementations of kernels/optimizer.h, one template per kernel:
// kernels/cpu/optimizer.cpp and kernels/cuda/ define the Backend::cpu and
// Backend::cuda specializations. Only kernels/optimizer.cpp calls them, after
// checking the arguments; the single-tensor kernels are the multi-tensor ones
// over one tensor.
//
// AdamW and the gradient norm's sums of squares (kernels/optimizer.h); on
// CUDA sum_of_squares_multi waits for the stream (the sums return to the host).
#pragma once

#include <cmath>
#include <span>
#include <vector>

#include "weft/core/exec_context.h"
#include "weft/kernels/dispatch.h"
#include "weft/kernels/optimizer.h"

namespace weft::kernels::impl {

// The per-step constants of an AdamW update, computed in f64 and rounded once
// to f32 (the same formulation as PyTorch), identically for every backend.
struct AdamWConstants {
  float b1, a1, b2, a2;  // beta1, 1 - beta1, beta2, 1 - beta2
  float scale;           // grad_scale
  float decay;           // 1 - lr · weight_decay, for the segments that decay
  float step_size;       // lr / (1 - beta1^step)
  float inv_sqrt_bias2;  // 1 / sqrt(1 - beta2^step)
  float eps;
};

inline AdamWConstants adamw_constants(const AdamWConfig& cfg) {
  const double bias1 = 1.0 - std::pow(static_cast<double>(cfg.beta1), cfg.step);
  const double bias2 = 1.0 - std::pow(static_cast<double>(cfg.beta2), cfg.step);
  return {.b1 = cfg.beta1,
          .a1 = 1.0f - cfg.beta1,
          .b2 = cfg.beta2,
          .a2 = 1.0f - cfg.beta2,
          .scale = cfg.grad_scale,
          .decay = static_cast<float>(1.0 - static_cast<double>(cfg.lr) * cfg.weight_decay),
          .step_size = static_cast<float>(cfg.lr / bias1),
          .inv_sqrt_bias2 = static_cast<float>(1.0 / std::sqrt(bias2)),
          .eps = cfg.eps};
}

template <Backend B>
void adamw_step_multi(const ExecContext& ec, std::span<const AdamWSegment> segments,
                      const AdamWConfig& cfg);
template <Backend B>
std::vector<double> sum_of_squares_multi(const ExecContext& ec, std::span<const Tensor> xs);
template <Backend B>
void sum_of_squares_total(const ExecContext& ec, std::span<const Tensor> xs, Tensor& total);

}  // namespace weft::kernels::impl
