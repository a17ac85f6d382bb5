#include "weft/kernels/norm.h"

#include "weft/kernels/cpu/norm.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

void layer_norm_forward(const ExecContext& ec, const Tensor& x, const Tensor& gamma,
                        const Tensor& beta, float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  const Device device =
      detail::kernel_device(ec, "layer_norm_forward", {&x, &gamma, &beta, &y, &mean, &rstd});
  if (device.is_cpu()) return cpu::layer_norm_forward(ec, x, gamma, beta, eps, y, mean, rstd);
  detail::no_kernel("layer_norm_forward", device);
}

void layer_norm_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                         const Tensor& gamma, const Tensor& mean, const Tensor& rstd, Tensor& dx,
                         Tensor& dgamma, Tensor& dbeta) {
  const Device device = detail::kernel_device(
      ec, "layer_norm_backward", {&dy, &x, &gamma, &mean, &rstd, &dx, &dgamma, &dbeta});
  if (device.is_cpu())
    return cpu::layer_norm_backward(ec, dy, x, gamma, mean, rstd, dx, dgamma, dbeta);
  detail::no_kernel("layer_norm_backward", device);
}

void rms_norm_forward(const ExecContext& ec, const Tensor& x, const Tensor& gamma, float eps,
                      Tensor& y, Tensor& rstd) {
  const Device device = detail::kernel_device(ec, "rms_norm_forward", {&x, &gamma, &y, &rstd});
  if (device.is_cpu()) return cpu::rms_norm_forward(ec, x, gamma, eps, y, rstd);
  detail::no_kernel("rms_norm_forward", device);
}

void rms_norm_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                       const Tensor& gamma, const Tensor& rstd, Tensor& dx, Tensor& dgamma) {
  const Device device =
      detail::kernel_device(ec, "rms_norm_backward", {&dy, &x, &gamma, &rstd, &dx, &dgamma});
  if (device.is_cpu()) return cpu::rms_norm_backward(ec, dy, x, gamma, rstd, dx, dgamma);
  detail::no_kernel("rms_norm_backward", device);
}

}  // namespace weft::kernels
