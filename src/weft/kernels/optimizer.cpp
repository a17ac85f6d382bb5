#include "weft/kernels/optimizer.h"

#include <string>
#include <utility>

#include "weft/kernels/dispatch.h"
#include "weft/kernels/impl/optimizer.h"

namespace weft::kernels {

namespace {

// The kernel, and which of its tensors or segments, for errors (`index` -1:
// the single-tensor kernel).
std::string label(const char* op, int64_t index) {
  return index < 0 ? std::string(op) : format("{} (entry {})", op, index);
}

void check_f32(const Tensor& t, int64_t numel, const char* op, int64_t index, const char* name) {
  WEFT_CHECK(t.dtype() == DType::f32 && t.numel() == numel,
             "{}: {} must be f32 with {} elements (like params), got {} {}", label(op, index), name,
             numel, dtype_name(t.dtype()), t.shape());
}

// The multi-tensor kernels' device check (the single-tensor ones leave it to
// detail::dispatch): every tensor on the context's device.
void check_device(const ExecContext& ec, const Tensor& t, const char* op, int64_t index,
                  const char* name) {
  WEFT_CHECK(t.device() == ec.device(),
             "{}: {} is on {} but the execution context runs on {}; move the tensor or call the "
             "kernel with a context on its device",
             label(op, index), name, t.device(), ec.device());
}

void check_config(const AdamWConfig& cfg, const char* op) {
  WEFT_CHECK(cfg.step >= 1, "{}: step is 1-based (the first step is 1), got {}", op, cfg.step);
  WEFT_CHECK(cfg.lr >= 0.0f && cfg.eps >= 0.0f && cfg.weight_decay >= 0.0f,
             "{}: lr, eps and weight_decay must be >= 0, got lr {} eps {} weight_decay {}", op,
             cfg.lr, cfg.eps, cfg.weight_decay);
  WEFT_CHECK(cfg.beta1 >= 0.0f && cfg.beta1 < 1.0f && cfg.beta2 >= 0.0f && cfg.beta2 < 1.0f,
             "{}: betas must lie in [0, 1), got beta1 {} beta2 {}", op, cfg.beta1, cfg.beta2);
  if (cfg.grad_scale_from) {
    WEFT_CHECK(cfg.grad_scale_from->dtype() == DType::f32 && cfg.grad_scale_from->numel() == 1,
               "{}: grad_scale_from must be one f32 element, got {} {}", op,
               dtype_name(cfg.grad_scale_from->dtype()), cfg.grad_scale_from->shape());
  }
}

// A segment's four tensors: f32, as many elements as its params (and, in a
// multi-tensor call, on the context's device).
void check_segment(const ExecContext& ec, const AdamWSegment& s, const char* op, int64_t index) {
  WEFT_CHECK(s.params && s.grads && s.m && s.v,
             "{}: params, grads, m and v must all be given (a null tensor pointer)",
             label(op, index));
  const int64_t n = s.params->numel();
  const std::pair<const Tensor*, const char*> tensors[] = {
      {s.params, "params"}, {s.grads, "grads"}, {s.m, "m"}, {s.v, "v"}};
  for (const auto& [t, name] : tensors) {
    check_f32(*t, n, op, index, name);
    if (index >= 0) check_device(ec, *t, op, index, name);
  }
}

}  // namespace

void adamw_step(const ExecContext& ec, Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                const AdamWConfig& cfg) {
  constexpr const char* op = "adamw_step";
  const AdamWSegment segment{
      .params = &params, .grads = &grads, .m = &m, .v = &v, .decay = cfg.weight_decay > 0.0f};
  check_segment(ec, segment, op, -1);
  check_config(cfg, op);
  return detail::dispatch(ec, op, {&params, &grads, &m, &v, cfg.grad_scale_from}, [&]<Backend B>() {
    return impl::adamw_step_multi<B>(ec, std::span(&segment, 1), cfg);
  });
}

void adamw_step_multi(const ExecContext& ec, std::span<const AdamWSegment> segments,
                      const AdamWConfig& cfg) {
  constexpr const char* op = "adamw_step_multi";
  for (size_t i = 0; i < segments.size(); ++i) {
    check_segment(ec, segments[i], op, static_cast<int64_t>(i));
  }
  check_config(cfg, op);
  return detail::dispatch(ec, op, {cfg.grad_scale_from}, [&]<Backend B>() {
    return impl::adamw_step_multi<B>(ec, segments, cfg);
  });
}

double sum_of_squares(const ExecContext& ec, const Tensor& x) {
  check_f32(x, x.numel(), "sum_of_squares", -1, "x");
  return detail::dispatch(ec, "sum_of_squares", {&x}, [&]<Backend B>() {
    return impl::sum_of_squares_multi<B>(ec, std::span(&x, 1)).front();
  });
}

std::vector<double> sum_of_squares_multi(const ExecContext& ec, std::span<const Tensor> xs) {
  constexpr const char* op = "sum_of_squares_multi";
  for (size_t i = 0; i < xs.size(); ++i) {
    check_f32(xs[i], xs[i].numel(), op, static_cast<int64_t>(i), "x");
    check_device(ec, xs[i], op, static_cast<int64_t>(i), "x");
  }
  return detail::dispatch(ec, op, {},
                          [&]<Backend B>() { return impl::sum_of_squares_multi<B>(ec, xs); });
}

void sum_of_squares_total(const ExecContext& ec, std::span<const Tensor> xs, Tensor& total) {
  constexpr const char* op = "sum_of_squares_total";
  for (size_t i = 0; i < xs.size(); ++i) {
    check_f32(xs[i], xs[i].numel(), op, static_cast<int64_t>(i), "x");
    check_device(ec, xs[i], op, static_cast<int64_t>(i), "x");
  }
  WEFT_CHECK(total.dtype() == DType::f64 && total.numel() == 1,
             "{}: total must be one f64 element, got {} {}", op, dtype_name(total.dtype()),
             total.shape());
  detail::dispatch(ec, op, {&total},
                   [&]<Backend B>() { impl::sum_of_squares_total<B>(ec, xs, total); });
}

}  // namespace weft::kernels
