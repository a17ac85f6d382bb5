#include "weft/kernels/step_scalars.h"

#include "weft/kernels/dispatch.h"
#include "weft/kernels/impl/step_scalars.h"

namespace weft::kernels {

namespace {

void check_scalar(const Tensor& t, DType dtype, int64_t n, const char* op, const char* name) {
  WEFT_CHECK(t.defined() && t.dtype() == dtype && t.numel() == n,
             "{}: {} must be {} {} element(s), got {} {}", op, name, n, dtype_name(dtype),
             t.defined() ? dtype_name(t.dtype()) : "undefined", t.defined() ? t.shape() : Shape{});
}

}  // namespace

void accumulate_scalar(const ExecContext& ec, const Tensor& x, Tensor& acc, bool reset) {
  constexpr const char* op = "accumulate_scalar";
  WEFT_CHECK(x.defined() && x.dtype() == DType::f32 && x.numel() >= 1,
             "{}: x must hold at least one f32 element", op);
  check_scalar(acc, DType::f64, 1, op, "acc");
  detail::dispatch(ec, op, {&x, &acc},
                   [&]<Backend B>() { impl::accumulate_scalar<B>(ec, x, acc, reset); });
}

void finish_mean(const ExecContext& ec, const Tensor& acc, double divisor, float second,
                 Tensor& out) {
  constexpr const char* op = "finish_mean";
  check_scalar(acc, DType::f64, 1, op, "acc");
  check_scalar(out, DType::f32, 2, op, "out");
  WEFT_CHECK(divisor > 0, "{}: the divisor must be positive, got {}", op, divisor);
  detail::dispatch(ec, op, {&acc, &out},
                   [&]<Backend B>() { impl::finish_mean<B>(ec, acc, divisor, second, out); });
}

void clip_scale(const ExecContext& ec, const Tensor& loss, Tensor& norm, double max_norm,
                Tensor& scale) {
  constexpr const char* op = "clip_scale";
  WEFT_CHECK(loss.defined() && loss.dtype() == DType::f32 && loss.numel() >= 1,
             "{}: loss must hold at least one f32 element", op);
  check_scalar(norm, DType::f64, 1, op, "norm");
  check_scalar(scale, DType::f32, 1, op, "scale");
  detail::dispatch(ec, op, {&loss, &norm, &scale},
                   [&]<Backend B>() { impl::clip_scale<B>(ec, loss, norm, max_norm, scale); });
}

}  // namespace weft::kernels
