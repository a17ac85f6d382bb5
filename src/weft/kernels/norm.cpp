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

void check_beta(const Tensor& beta, int64_t c, const char* op) {
  WEFT_CHECK(beta.dtype() == DType::f32 && beta.numel() == c,
             "{}: beta must be f32 with {} elements, got {}", op, c, beta.shape());
}

// A tensor of x's dtype and size, not x's storage (`what` names it).
void check_like(const Tensor& t, const Tensor& x, const char* op, const char* what) {
  WEFT_CHECK(t.dtype() == x.dtype() && t.numel() == x.numel(),
             "{}: {} must be {} with {} elements like x, got {} {}", op, what,
             dtype_name(x.dtype()), x.numel(), dtype_name(t.dtype()), t.shape());
}

// The residual add in front of a norm: branch and sum like x (sum a tensor of
// its own), a u8 mask of x's size when dropout runs.
void check_residual_add(const Tensor& x, const Tensor& branch, const ResidualDropout& dropout,
                        const Tensor& sum, const Tensor& mask, const char* op) {
  check_like(branch, x, op, "branch");
  check_like(sum, x, op, "sum");
  WEFT_CHECK(sum.raw() != x.raw() && sum.raw() != branch.raw(),
             "{}: sum must not share storage with x or the branch (the norm reads it back)", op);
  WEFT_CHECK(dropout.p >= 0.0f && dropout.p < 1.0f, "{}: dropout must lie in [0, 1), got {}", op,
             dropout.p);
  WEFT_CHECK(dropout.rows.segment == 0 || x.device().is_cpu(),
             "{}: dropout keyed by rows of a longer sequence (context parallelism) runs on the "
             "CPU kernels only, got x on {}",
             op, x.device());
  if (dropout.p > 0.0f) {
    WEFT_CHECK(mask.defined() && mask.dtype() == DType::u8 && mask.numel() == x.numel(),
               "{}: dropout needs a u8 mask of {} elements, got {}", op, x.numel(),
               mask.defined() ? format("{} {}", dtype_name(mask.dtype()), mask.shape())
                              : std::string("none"));
  }
}

// The optional residual gradient of a norm's backward (kernels/norm.h).
void check_residual_grad(const ResidualGrad& r, const Tensor& x, const Tensor& dx, const char* op) {
  if (r.dres) {
    check_like(*r.dres, x, op, "the residual gradient");
    WEFT_CHECK(r.dres->raw() != dx.raw(), "{}: dx must not overwrite the residual gradient", op);
  }
  if (!r.dbranch) return;
  check_like(*r.dbranch, x, op, "dbranch");
  WEFT_CHECK(r.dbranch->raw() != dx.raw() && (!r.dres || r.dbranch->raw() != r.dres->raw()),
             "{}: dbranch must be a tensor of its own", op);
  WEFT_CHECK(r.mask && r.mask->dtype() == DType::u8 && r.mask->numel() == x.numel(),
             "{}: dbranch needs the dropout mask (u8, {} elements)", op, x.numel());
  WEFT_CHECK(r.p >= 0.0f && r.p < 1.0f, "{}: dropout must lie in [0, 1), got {}", op, r.p);
}

}  // namespace

void layer_norm_forward(const ExecContext& ec, const Tensor& x, const Tensor& gamma,
                        const Tensor& beta, float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  check_rows(x, y, gamma, "layer_norm_forward");
  const int64_t n = x.shape().rows(), c = x.shape().last();
  check_beta(beta, c, "layer_norm_forward");
  check_stats(mean, n, "layer_norm_forward: mean");
  check_stats(rstd, n, "layer_norm_forward: rstd");
  WEFT_CHECK(x.dtype() == y.dtype(), "layer_norm_forward: x is {} but y is {}",
             dtype_name(x.dtype()), dtype_name(y.dtype()));
  return detail::dispatch(
      ec, "layer_norm_forward", {&x, &gamma, &beta, &y, &mean, &rstd}, [&]<Backend B>() {
        return impl::layer_norm_forward<B>(ec, x, nullptr, gamma, beta, eps, y, mean, rstd);
      });
}

void add_layer_norm_forward(const ExecContext& ec, const Tensor& x, const Tensor& branch,
                            const ResidualDropout& dropout, const Tensor& gamma, const Tensor& beta,
                            float eps, Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd,
                            Tensor& mask) {
  const char* op = "add_layer_norm_forward";
  check_rows(x, y, gamma, op);
  const int64_t n = x.shape().rows(), c = x.shape().last();
  check_beta(beta, c, op);
  check_stats(mean, n, "add_layer_norm_forward: mean");
  check_stats(rstd, n, "add_layer_norm_forward: rstd");
  check_like(y, x, op, "y");
  check_residual_add(x, branch, dropout, sum, mask, op);
  const impl::ResidualAdd residual{branch, dropout, sum, mask};
  return detail::dispatch(
      ec, op, {&x, &branch, &gamma, &beta, &sum, &y, &mean, &rstd, &mask}, [&]<Backend B>() {
        return impl::layer_norm_forward<B>(ec, x, &residual, gamma, beta, eps, y, mean, rstd);
      });
}

void layer_norm_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                         const Tensor& gamma, const Tensor& mean, const Tensor& rstd, Tensor& dx,
                         Tensor& dgamma, Tensor& dbeta, const ResidualGrad& residual) {
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
  check_residual_grad(residual, x, dx, "layer_norm_backward");
  return detail::dispatch(ec, "layer_norm_backward",
                          {&dy, &x, &gamma, &mean, &rstd, &dx, &dgamma, &dbeta, residual.dres,
                           residual.mask, residual.dbranch},
                          [&]<Backend B>() {
                            return impl::layer_norm_backward<B>(ec, dy, x, gamma, mean, rstd, dx,
                                                                dgamma, dbeta, residual);
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
    return impl::rms_norm_forward<B>(ec, x, nullptr, gamma, eps, y, rstd);
  });
}

void add_rms_norm_forward(const ExecContext& ec, const Tensor& x, const Tensor& branch,
                          const ResidualDropout& dropout, const Tensor& gamma, float eps,
                          Tensor& sum, Tensor& y, Tensor& rstd, Tensor& mask) {
  const char* op = "add_rms_norm_forward";
  check_rows(x, y, gamma, op);
  check_stats(rstd, x.shape().rows(), "add_rms_norm_forward: rstd");
  check_like(y, x, op, "y");
  check_residual_add(x, branch, dropout, sum, mask, op);
  const impl::ResidualAdd residual{branch, dropout, sum, mask};
  return detail::dispatch(ec, op, {&x, &branch, &gamma, &sum, &y, &rstd, &mask}, [&]<Backend B>() {
    return impl::rms_norm_forward<B>(ec, x, &residual, gamma, eps, y, rstd);
  });
}

void rms_norm_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                       const Tensor& gamma, const Tensor& rstd, Tensor& dx, Tensor& dgamma,
                       const ResidualGrad& residual) {
  check_rows(x, dy, gamma, "rms_norm_backward");
  const int64_t n = x.shape().rows(), c = x.shape().last();
  check_stats(rstd, n, "rms_norm_backward: rstd");
  check_stats(dgamma, c, "rms_norm_backward: dgamma");
  WEFT_CHECK(
      dx.numel() == x.numel() && dx.dtype() == dy.dtype() && x.dtype() == dy.dtype(),
      "rms_norm_backward: x, dy and dx must share dtype and size (x {} {}, dy {} {}, dx {} {})",
      dtype_name(x.dtype()), x.shape(), dtype_name(dy.dtype()), dy.shape(), dtype_name(dx.dtype()),
      dx.shape());
  check_residual_grad(residual, x, dx, "rms_norm_backward");
  return detail::dispatch(
      ec, "rms_norm_backward",
      {&dy, &x, &gamma, &rstd, &dx, &dgamma, residual.dres, residual.mask, residual.dbranch},
      [&]<Backend B>() {
        return impl::rms_norm_backward<B>(ec, dy, x, gamma, rstd, dx, dgamma, residual);
      });
}

}  // namespace weft::kernels
