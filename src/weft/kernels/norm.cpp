#include "weft/kernels/norm.h"

#include "weft/kernels/cpu/norm.h"
#include "weft/kernels/cuda/norm.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

void layer_norm_forward(const ExecContext& ec, const Tensor& x, const Tensor& gamma,
                        const Tensor& beta, float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  return detail::dispatch(
      ec, "layer_norm_forward", {&x, &gamma, &beta, &y, &mean, &rstd},
      [&] { return cpu::layer_norm_forward(ec, x, gamma, beta, eps, y, mean, rstd); },
      [&] { return cuda::layer_norm_forward(ec, x, gamma, beta, eps, y, mean, rstd); });
}

void layer_norm_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                         const Tensor& gamma, const Tensor& mean, const Tensor& rstd, Tensor& dx,
                         Tensor& dgamma, Tensor& dbeta) {
  return detail::dispatch(
      ec, "layer_norm_backward", {&dy, &x, &gamma, &mean, &rstd, &dx, &dgamma, &dbeta},
      [&] { return cpu::layer_norm_backward(ec, dy, x, gamma, mean, rstd, dx, dgamma, dbeta); },
      [&] { return cuda::layer_norm_backward(ec, dy, x, gamma, mean, rstd, dx, dgamma, dbeta); });
}

void rms_norm_forward(const ExecContext& ec, const Tensor& x, const Tensor& gamma, float eps,
                      Tensor& y, Tensor& rstd) {
  return detail::dispatch(
      ec, "rms_norm_forward", {&x, &gamma, &y, &rstd},
      [&] { return cpu::rms_norm_forward(ec, x, gamma, eps, y, rstd); },
      [&] { return cuda::rms_norm_forward(ec, x, gamma, eps, y, rstd); });
}

void rms_norm_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                       const Tensor& gamma, const Tensor& rstd, Tensor& dx, Tensor& dgamma) {
  return detail::dispatch(
      ec, "rms_norm_backward", {&dy, &x, &gamma, &rstd, &dx, &dgamma},
      [&] { return cpu::rms_norm_backward(ec, dy, x, gamma, rstd, dx, dgamma); },
      [&] { return cuda::rms_norm_backward(ec, dy, x, gamma, rstd, dx, dgamma); });
}

}  // namespace weft::kernels
