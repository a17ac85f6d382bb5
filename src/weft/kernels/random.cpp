#include "weft/kernels/random.h"

#include "weft/kernels/cpu/random.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

void fill_uniform(const ExecContext& ec, uint64_t seed, uint64_t offset, Tensor& out) {
  const Device device = detail::kernel_device(ec, "fill_uniform", {&out});
  if (device.is_cpu()) return cpu::fill_uniform(ec, seed, offset, out);
  detail::no_kernel("fill_uniform", device);
}

void dropout_forward(const ExecContext& ec, const Tensor& x, float p, uint64_t seed,
                     uint64_t offset, Tensor& y, Tensor& mask) {
  const Device device = detail::kernel_device(ec, "dropout_forward", {&x, &y, &mask});
  if (device.is_cpu()) return cpu::dropout_forward(ec, x, p, seed, offset, y, mask);
  detail::no_kernel("dropout_forward", device);
}

void dropout_backward(const ExecContext& ec, const Tensor& dy, const Tensor& mask, float p,
                      Tensor& dx) {
  const Device device = detail::kernel_device(ec, "dropout_backward", {&dy, &mask, &dx});
  if (device.is_cpu()) return cpu::dropout_backward(ec, dy, mask, p, dx);
  detail::no_kernel("dropout_backward", device);
}

}  // namespace weft::kernels
