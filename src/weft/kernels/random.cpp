#include "weft/kernels/random.h"

#include "weft/kernels/dispatch.h"
#include "weft/kernels/elementwise.h"
#include "weft/kernels/impl/random.h"

namespace weft::kernels {

namespace {

void check_p(float p) {
  WEFT_CHECK(p >= 0.0f && p < 1.0f,
             "dropout probability must lie in [0, 1), got {} (use 0 to disable dropout)", p);
}

}  // namespace

void fill_uniform(const ExecContext& ec, uint64_t seed, uint64_t offset, Tensor& out) {
  WEFT_CHECK(out.dtype() == DType::f32, "fill_uniform writes f32, got a {} tensor of shape {}",
             dtype_name(out.dtype()), out.shape());
  return detail::dispatch(ec, "fill_uniform", {&out}, [&]<Backend B>() {
    return impl::fill_uniform<B>(ec, seed, offset, out);
  });
}

void dropout_forward(const ExecContext& ec, const Tensor& x, float p, uint64_t seed,
                     uint64_t offset, Tensor& y, Tensor& mask) {
  check_p(p);
  detail::check_float(x, "dropout input");
  WEFT_CHECK(y.shape() == x.shape() && y.dtype() == x.dtype(),
             "dropout output is {} {} but the input is {} {}", dtype_name(y.dtype()), y.shape(),
             dtype_name(x.dtype()), x.shape());
  WEFT_CHECK(mask.shape() == x.shape() && mask.dtype() == DType::u8,
             "dropout mask must be u8 of the input's shape {}, got {} {}", x.shape(),
             dtype_name(mask.dtype()), mask.shape());
  return detail::dispatch(ec, "dropout_forward", {&x, &y, &mask}, [&]<Backend B>() {
    return impl::dropout_forward<B>(ec, x, p, seed, offset, y, mask);
  });
}

void dropout_backward(const ExecContext& ec, const Tensor& dy, const Tensor& mask, float p,
                      Tensor& dx) {
  check_p(p);
  detail::check_float(dy, "dropout output gradient");
  WEFT_CHECK(dx.shape() == dy.shape() && dx.dtype() == dy.dtype(),
             "dropout input gradient is {} {} but the output gradient is {} {}",
             dtype_name(dx.dtype()), dx.shape(), dtype_name(dy.dtype()), dy.shape());
  WEFT_CHECK(mask.shape() == dy.shape() && mask.dtype() == DType::u8,
             "dropout mask must be u8 of the gradient's shape {}, got {} {}", dy.shape(),
             dtype_name(mask.dtype()), mask.shape());
  return detail::dispatch(ec, "dropout_backward", {&dy, &mask, &dx}, [&]<Backend B>() {
    return impl::dropout_backward<B>(ec, dy, mask, p, dx);
  });
}

}  // namespace weft::kernels
