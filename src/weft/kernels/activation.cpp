#include "weft/kernels/activation.h"

#include "weft/kernels/cpu/activation.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

void gelu_forward(const ExecContext& ec, const Tensor& x, Tensor& y) {
  const Device device = detail::kernel_device(ec, "gelu_forward", {&x, &y});
  if (device.is_cpu()) return cpu::gelu_forward(ec, x, y);
  detail::no_kernel("gelu_forward", device);
}

void gelu_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x, Tensor& dx) {
  const Device device = detail::kernel_device(ec, "gelu_backward", {&dy, &x, &dx});
  if (device.is_cpu()) return cpu::gelu_backward(ec, dy, x, dx);
  detail::no_kernel("gelu_backward", device);
}

void bias_add(const ExecContext& ec, Tensor& y, const Tensor& bias) {
  const Device device = detail::kernel_device(ec, "bias_add", {&y, &bias});
  if (device.is_cpu()) return cpu::bias_add(ec, y, bias);
  detail::no_kernel("bias_add", device);
}

void bias_backward(const ExecContext& ec, const Tensor& dy, Tensor& dbias) {
  const Device device = detail::kernel_device(ec, "bias_backward", {&dy, &dbias});
  if (device.is_cpu()) return cpu::bias_backward(ec, dy, dbias);
  detail::no_kernel("bias_backward", device);
}

void add(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& out) {
  const Device device = detail::kernel_device(ec, "add", {&a, &b, &out});
  if (device.is_cpu()) return cpu::add(ec, a, b, out);
  detail::no_kernel("add", device);
}

void axpy(const ExecContext& ec, float alpha, const Tensor& x, Tensor& y) {
  const Device device = detail::kernel_device(ec, "axpy", {&x, &y});
  if (device.is_cpu()) return cpu::axpy(ec, alpha, x, y);
  detail::no_kernel("axpy", device);
}

void scale(const ExecContext& ec, Tensor& y, float alpha) {
  const Device device = detail::kernel_device(ec, "scale", {&y});
  if (device.is_cpu()) return cpu::scale(ec, y, alpha);
  detail::no_kernel("scale", device);
}

}  // namespace weft::kernels
