#include "weft/kernels/impl/step_scalars.h"

namespace weft::kernels::impl {

template <>
void accumulate_scalar<Backend::cpu>(const ExecContext&, const Tensor& x, Tensor& acc, bool reset) {
  double* a = acc.data<double>();
  *a = (reset ? 0.0 : *a) + static_cast<double>(*x.data<float>());
}

template <>
void finish_mean<Backend::cpu>(const ExecContext&, const Tensor& acc, double divisor, float second,
                               Tensor& out) {
  float* o = out.data<float>();
  o[0] = StepScalarMath::mean(*acc.data<double>(), divisor);
  o[1] = second;
}

template <>
void clip_scale<Backend::cpu>(const ExecContext&, const Tensor& loss, Tensor& norm, double max_norm,
                              Tensor& scale) {
  double* n = norm.data<double>();
  *n = StepScalarMath::root(*n);
  *scale.data<float>() = StepScalarMath::scale(*loss.data<float>(), *n, max_norm);
}

}  // namespace weft::kernels::impl
