#include "weft/kernels/optimizer.h"

#include "weft/kernels/dispatch.h"
#include "weft/kernels/impl/optimizer.h"

namespace weft::kernels {

namespace {

void check_f32(const Tensor& t, int64_t numel, const char* op, const char* name) {
  WEFT_CHECK(t.dtype() == DType::f32 && t.numel() == numel,
             "{}: {} must be f32 with {} elements (like params), got {} {}", op, name, numel,
             dtype_name(t.dtype()), t.shape());
}

}  // namespace

void adamw_step(const ExecContext& ec, Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                const AdamWConfig& cfg) {
  constexpr const char* op = "adamw_step";
  const int64_t n = params.numel();
  check_f32(params, n, op, "params");
  check_f32(grads, n, op, "grads");
  check_f32(m, n, op, "m");
  check_f32(v, n, op, "v");
  WEFT_CHECK(cfg.step >= 1, "{}: step is 1-based (the first step is 1), got {}", op, cfg.step);
  WEFT_CHECK(cfg.lr >= 0.0f && cfg.eps >= 0.0f && cfg.weight_decay >= 0.0f,
             "{}: lr, eps and weight_decay must be >= 0, got lr {} eps {} weight_decay {}", op,
             cfg.lr, cfg.eps, cfg.weight_decay);
  WEFT_CHECK(cfg.beta1 >= 0.0f && cfg.beta1 < 1.0f && cfg.beta2 >= 0.0f && cfg.beta2 < 1.0f,
             "{}: betas must lie in [0, 1), got beta1 {} beta2 {}", op, cfg.beta1, cfg.beta2);
  return detail::dispatch(ec, "adamw_step", {&params, &grads, &m, &v}, [&]<Backend B>() {
    return impl::adamw_step<B>(ec, params, grads, m, v, cfg);
  });
}

double sum_of_squares(const ExecContext& ec, const Tensor& x) {
  check_f32(x, x.numel(), "sum_of_squares", "x");
  return detail::dispatch(ec, "sum_of_squares", {&x},
                          [&]<Backend B>() { return impl::sum_of_squares<B>(ec, x); });
}

}  // namespace weft::kernels
