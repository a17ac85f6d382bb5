#include "weft/kernels/activation.h"

#include "weft/kernels/cpu/activation.h"
#include "weft/kernels/cuda/activation.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

void gelu_forward(const ExecContext& ec, const Tensor& x, Tensor& y) {
  return detail::dispatch(
      ec, "gelu_forward", {&x, &y}, [&] { return cpu::gelu_forward(ec, x, y); },
      [&] { return cuda::gelu_forward(ec, x, y); });
}

void gelu_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x, Tensor& dx) {
  return detail::dispatch(
      ec, "gelu_backward", {&dy, &x, &dx}, [&] { return cpu::gelu_backward(ec, dy, x, dx); },
      [&] { return cuda::gelu_backward(ec, dy, x, dx); });
}

void bias_add(const ExecContext& ec, Tensor& y, const Tensor& bias) {
  return detail::dispatch(
      ec, "bias_add", {&y, &bias}, [&] { return cpu::bias_add(ec, y, bias); },
      [&] { return cuda::bias_add(ec, y, bias); });
}

void bias_backward(const ExecContext& ec, const Tensor& dy, Tensor& dbias) {
  return detail::dispatch(
      ec, "bias_backward", {&dy, &dbias}, [&] { return cpu::bias_backward(ec, dy, dbias); },
      [&] { return cuda::bias_backward(ec, dy, dbias); });
}

void add(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& out) {
  return detail::dispatch(
      ec, "add", {&a, &b, &out}, [&] { return cpu::add(ec, a, b, out); },
      [&] { return cuda::add(ec, a, b, out); });
}

void axpy(const ExecContext& ec, float alpha, const Tensor& x, Tensor& y) {
  return detail::dispatch(
      ec, "axpy", {&x, &y}, [&] { return cpu::axpy(ec, alpha, x, y); },
      [&] { return cuda::axpy(ec, alpha, x, y); });
}

void scale(const ExecContext& ec, Tensor& y, float alpha) {
  return detail::dispatch(
      ec, "scale", {&y}, [&] { return cpu::scale(ec, y, alpha); },
      [&] { return cuda::scale(ec, y, alpha); });
}

}  // namespace weft::kernels
