#include "weft/kernels/norm.h"

#include "weft/kernels/dispatch.h"
#include "weft/kernels/elementwise.h"
#include "weft/kernels/impl/norm.h"

namespace weft::kernels {

namespace {

void check_rows(const Tensor& x, const Tensor& y, const Tensor& gamma, const char* op) {
  detail::check_float(x, "norm input");
  detail::check_float(y, "norm output");
  WEFT_CHECK(x.shape() == y.shape() || x.numel() == y.numel(), "{}: x {} and y {} differ", op,
             x.shape(), y.shape());
  WEFT_CHECK(gamma.dtype() == DType::f32 && gamma.numel() == x.shape().last(),
             "{}: gamma must be f32 with {} elements (the last dimension of x {}), got {} {}", op,
             x.shape().last(), x.shape(), dtype_name(gamma.dtype()), gamma.shape());
}

void check_stats(const Tensor& s, int64_t n, const char* what) {
  WEFT_CHECK(s.dtype() == DType::f32 && s.numel() == n,
             "{} must be f32 with {} elements, got {} {}", what, n, dtype_name(s.dtype()),
             s.shape());
}

}  // namespace

void layer_norm_forward(const ExecContext& ec, const Tensor& x, const Tensor& gamma,
                        const Tensor& beta, float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  check_rows(x, y, gamma, "layer_norm_forward");
  const int64_t n = x.shape().rows(), c = x.shape().last();
  WEFT_CHECK(beta.dtype() == DType::f32 && beta.numel() == c,
             "layer_norm_forward: beta must be f32 with {} elements, got {}", c, beta.shape());
  check_stats(mean, n, "layer_norm_forward: mean");
  check_stats(rstd, n, "layer_norm_forward: rstd");
  WEFT_CHECK(x.dtype() == y.dtype(), "layer_norm_forward: x is {} but y is {}",
             dtype_name(x.dtype()), dtype_name(y.dtype()));
  return detail::dispatch(
      ec, "layer_norm_forward", {&x, &gamma, &beta, &y, &mean, &rstd}, [&]<Backend B>() {
        return impl::layer_norm_forward<B>(ec, x, gamma, beta, eps, y, mean, rstd);
      });
}

void layer_norm_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                         const Tensor& gamma, const Tensor& mean, const Tensor& rstd, Tensor& dx,
                         Tensor& dgamma, Tensor& dbeta) {
  check_rows(x, dy, gamma, "layer_norm_backward");
  const int64_t n = x.shape().rows(), c = x.shape().last();
  check_stats(mean, n, "layer_norm_backward: mean");
  check_stats(rstd, n, "layer_norm_backward: rstd");
  check_stats(dgamma, c, "layer_norm_backward: dgamma");
  check_stats(dbeta, c, "layer_norm_backward: dbeta");
  WEFT_CHECK(dx.numel() == x.numel() && dx.dtype() == dy.dtype(),
             "layer_norm_backward: dx must match dy ({} {}), got {} {}", dtype_name(dy.dtype()),
             dy.shape(), dtype_name(dx.dtype()), dx.shape());
  WEFT_CHECK(x.dtype() == dy.dtype(), "layer_norm_backward: x is {} but dy is {}",
             dtype_name(x.dtype()), dtype_name(dy.dtype()));
  return detail::dispatch(ec, "layer_norm_backward",
                          {&dy, &x, &gamma, &mean, &rstd, &dx, &dgamma, &dbeta}, [&]<Backend B>() {
                            return impl::layer_norm_backward<B>(ec, dy, x, gamma, mean, rstd, dx,
                                                                dgamma, dbeta);
                          });
}

void rms_norm_forward(const ExecContext& ec, const Tensor& x, const Tensor& gamma, float eps,
                      Tensor& y, Tensor& rstd) {
  check_rows(x, y, gamma, "rms_norm_forward");
  const int64_t n = x.shape().rows();
  check_stats(rstd, n, "rms_norm_forward: rstd");
  WEFT_CHECK(x.dtype() == y.dtype(), "rms_norm_forward: x is {} but y is {}", dtype_name(x.dtype()),
             dtype_name(y.dtype()));
  return detail::dispatch(ec, "rms_norm_forward", {&x, &gamma, &y, &rstd}, [&]<Backend B>() {
    return impl::rms_norm_forward<B>(ec, x, gamma, eps, y, rstd);
  });
}

void rms_norm_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                       const Tensor& gamma, const Tensor& rstd, Tensor& dx, Tensor& dgamma) {
  check_rows(x, dy, gamma, "rms_norm_backward");
  const int64_t n = x.shape().rows(), c = x.shape().last();
  check_stats(rstd, n, "rms_norm_backward: rstd");
  check_stats(dgamma, c, "rms_norm_backward: dgamma");
  WEFT_CHECK(
      dx.numel() == x.numel() && dx.dtype() == dy.dtype() && x.dtype() == dy.dtype(),
      "rms_norm_backward: x, dy and dx must share dtype and size (x {} {}, dy {} {}, dx {} {})",
      dtype_name(x.dtype()), x.shape(), dtype_name(dy.dtype()), dy.shape(), dtype_name(dx.dtype()),
      dx.shape());
  return detail::dispatch(
      ec, "rms_norm_backward", {&dy, &x, &gamma, &rstd, &dx, &dgamma},
      [&]<Backend B>() { return impl::rms_norm_backward<B>(ec, dy, x, gamma, rstd, dx, dgamma); });
}

}  // namespace weft::kernels
