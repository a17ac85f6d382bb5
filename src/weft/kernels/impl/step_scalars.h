// The implementations of kernels/step_scalars.h: kernels/cpu/step_scalars.cpp
// and kernels/cuda/step_scalars.cu define the Backend::cpu and Backend::cuda
// specializations; kernels/step_scalars.cpp checks the arguments first.
#pragma once

#include <cmath>

#include "weft/core/exec_context.h"
#include "weft/kernels/dispatch.h"
#include "weft/kernels/step_scalars.h"

namespace weft::kernels::impl {

// The arithmetic both backends run (host and device), so they agree bit for bit.
#if defined(__CUDACC__)
#define WEFT_STEP_SCALARS_HD __host__ __device__
#else
#define WEFT_STEP_SCALARS_HD
#endif

struct StepScalarMath {
  WEFT_STEP_SCALARS_HD static float mean(double acc, double divisor) {
    return static_cast<float>(acc / divisor);
  }
  // std::sqrt(std::max(sum, 0.0)), which keeps a NaN sum NaN.
  WEFT_STEP_SCALARS_HD static double root(double sum) { return std::sqrt(sum < 0.0 ? 0.0 : sum); }
  // optim::clip_scale, and NaN for a step that must not be taken.
  WEFT_STEP_SCALARS_HD static float scale(float loss, double norm, double max_norm) {
    if (!std::isfinite(loss) || !std::isfinite(norm)) return NAN;
    if (max_norm <= 0 || !(norm > max_norm)) return 1.0f;
    return static_cast<float>(max_norm / (norm + 1e-6));
  }
};

template <Backend B>
void accumulate_scalar(const ExecContext& ec, const Tensor& x, Tensor& acc, bool reset);
template <Backend B>
void finish_mean(const ExecContext& ec, const Tensor& acc, double divisor, float second,
                 Tensor& out);
template <Backend B>
void clip_scale(const ExecContext& ec, const Tensor& loss, Tensor& norm, double max_norm,
                Tensor& scale);

}  // namespace weft::kernels::impl
