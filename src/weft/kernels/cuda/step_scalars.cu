#include "weft/kernels/cuda/common.cuh"
#include "weft/kernels/impl/step_scalars.h"

namespace weft::kernels::impl {

// The launch and element helpers of kernels/cuda/ (common.cuh and its kin).
using namespace cuda;

namespace {

// One thread each: these are a handful of scalars between the step's kernels.
__global__ void accumulate_scalar_kernel(const float* x, double* acc, bool reset) {
  *acc = (reset ? 0.0 : *acc) + static_cast<double>(*x);
}

__global__ void finish_mean_kernel(const double* acc, double divisor, float second, float* out) {
  out[0] = StepScalarMath::mean(*acc, divisor);
  out[1] = second;
}

__global__ void clip_scale_kernel(const float* loss, double* norm, double max_norm, float* scale) {
  const double n = StepScalarMath::root(*norm);
  *norm = n;
  *scale = StepScalarMath::scale(*loss, n, max_norm);
}

}  // namespace

template <>
void accumulate_scalar<Backend::cuda>(const ExecContext& ec, const Tensor& x, Tensor& acc,
                                      bool reset) {
  accumulate_scalar_kernel<<<1, 1, 0, stream_of(ec)>>>(dptr<const float>(x), dptr<double>(acc),
                                                       reset);
  check_launch("accumulate_scalar");
}

template <>
void finish_mean<Backend::cuda>(const ExecContext& ec, const Tensor& acc, double divisor,
                                float second, Tensor& out) {
  finish_mean_kernel<<<1, 1, 0, stream_of(ec)>>>(dptr<const double>(acc), divisor, second,
                                                 dptr<float>(out));
  check_launch("finish_mean");
}

template <>
void clip_scale<Backend::cuda>(const ExecContext& ec, const Tensor& loss, Tensor& norm,
                               double max_norm, Tensor& scale) {
  clip_scale_kernel<<<1, 1, 0, stream_of(ec)>>>(dptr<const float>(loss), dptr<double>(norm),
                                                max_norm, dptr<float>(scale));
  check_launch("clip_scale");
}

}  // namespace weft::kernels::impl
