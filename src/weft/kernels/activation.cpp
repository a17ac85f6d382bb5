#include "weft/kernels/activation.h"

#include "weft/kernels/dispatch.h"
#include "weft/kernels/elementwise.h"
#include "weft/kernels/impl/activation.h"

namespace weft::kernels {

namespace {

void check_same(const Tensor& a, const Tensor& b, const char* op) {
  detail::check_float(a, op);
  detail::check_float(b, op);
  WEFT_CHECK(a.numel() == b.numel() && a.dtype() == b.dtype(),
             "{}: tensors differ ({} {} vs {} {})", op, dtype_name(a.dtype()), a.shape(),
             dtype_name(b.dtype()), b.shape());
}

}  // namespace

void gelu_forward(const ExecContext& ec, const Tensor& x, Tensor& y) {
  check_same(x, y, "gelu_forward");
  return detail::dispatch(ec, "gelu_forward", {&x, &y},
                          [&]<Backend B>() { return impl::gelu_forward<B>(ec, x, y); });
}

void gelu_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x, Tensor& dx) {
  check_same(x, dy, "gelu_backward");
  check_same(dy, dx, "gelu_backward");
  return detail::dispatch(ec, "gelu_backward", {&dy, &x, &dx},
                          [&]<Backend B>() { return impl::gelu_backward<B>(ec, dy, x, dx); });
}

void bias_add(const ExecContext& ec, Tensor& y, const Tensor& bias) {
  detail::check_float(y, "bias_add output");
  const int64_t c = y.shape().last();
  WEFT_CHECK(bias.dtype() == DType::f32 && bias.numel() == c,
             "bias_add: bias must be f32 with {} elements (last dimension of {}), got {} {}", c,
             y.shape(), dtype_name(bias.dtype()), bias.shape());
  return detail::dispatch(ec, "bias_add", {&y, &bias},
                          [&]<Backend B>() { return impl::bias_add<B>(ec, y, bias); });
}

void bias_backward(const ExecContext& ec, const Tensor& dy, Tensor& dbias) {
  detail::check_float(dy, "bias_backward input");
  const int64_t c = dy.shape().last();
  WEFT_CHECK(dbias.dtype() == DType::f32 && dbias.numel() == c,
             "bias_backward: dbias must be f32 with {} elements, got {} {}", c,
             dtype_name(dbias.dtype()), dbias.shape());
  return detail::dispatch(ec, "bias_backward", {&dy, &dbias},
                          [&]<Backend B>() { return impl::bias_backward<B>(ec, dy, dbias); });
}

void add(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& out) {
  check_same(a, b, "add");
  check_same(a, out, "add");
  return detail::dispatch(ec, "add", {&a, &b, &out},
                          [&]<Backend B>() { return impl::add<B>(ec, a, b, out); });
}

void axpy(const ExecContext& ec, float alpha, const Tensor& x, Tensor& y) {
  detail::check_float(x, "axpy input");
  detail::check_float(y, "axpy output");
  WEFT_CHECK(x.numel() == y.numel(), "axpy: x has {} elements, y {}", x.numel(), y.numel());
  return detail::dispatch(ec, "axpy", {&x, &y},
                          [&]<Backend B>() { return impl::axpy<B>(ec, alpha, x, y); });
}

void scale(const ExecContext& ec, Tensor& y, float alpha) {
  detail::check_float(y, "scale");
  return detail::dispatch(ec, "scale", {&y},
                          [&]<Backend B>() { return impl::scale<B>(ec, y, alpha); });
}

}  // namespace weft::kernels
