#include "weft/kernels/optimizer.h"

#include "weft/kernels/cpu/optimizer.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

void adamw_step(const ExecContext& ec, Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                const AdamWConfig& cfg) {
  const Device device = detail::kernel_device(ec, "adamw_step", {&params, &grads, &m, &v});
  if (device.is_cpu()) return cpu::adamw_step(ec, params, grads, m, v, cfg);
  detail::no_kernel("adamw_step", device);
}

double sum_of_squares(const ExecContext& ec, const Tensor& x) {
  const Device device = detail::kernel_device(ec, "sum_of_squares", {&x});
  if (device.is_cpu()) return cpu::sum_of_squares(ec, x);
  detail::no_kernel("sum_of_squares", device);
}

}  // namespace weft::kernels
