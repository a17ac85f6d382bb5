#include "weft/kernels/activation.h"

#include "weft/kernels/cpu/onednn.h"
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

// gu (..., 2N) and a tensor of its rows' halves (..., N) in gu's dtype.
void check_swiglu(const Tensor& gu, const Tensor& half, const char* op, const char* what) {
  detail::check_float(gu, op);
  WEFT_CHECK(gu.dim() >= 1 && gu.shape().last() % 2 == 0,
             "{}: gu must be (..., 2N) = [gate | up] per row, got shape {}", op, gu.shape());
  const int64_t n = gu.shape().last() / 2;
  bool same = half.dtype() == gu.dtype() && half.dim() == gu.dim();
  for (int64_t i = 0; same && i < gu.dim(); ++i) {
    same = half.size(i) == (i + 1 == gu.dim() ? n : gu.size(i));
  }
  WEFT_CHECK(same, "{}: {} must be {} with gu's shape {} but a last dimension of {}, got {} {}", op,
             what, dtype_name(gu.dtype()), gu.shape(), n, dtype_name(half.dtype()), half.shape());
}

}  // namespace

void swiglu_forward(const ExecContext& ec, const Tensor& gu, Tensor& out) {
  check_swiglu(gu, out, "swiglu_forward", "out");
  // Rows of out are narrower than gu's: written in place they would overwrite
  // gate and up values other threads still read.
  if (gu.numel() == 0) return;  // no rows (an expert without tokens)
  WEFT_CHECK(out.raw() != gu.raw(), "swiglu_forward cannot write out over gu");
  return detail::dispatch(ec, "swiglu_forward", {&gu, &out},
                          [&]<Backend B>() { return impl::swiglu_forward<B>(ec, gu, out); });
}

void swiglu_backward(const ExecContext& ec, const Tensor& dy, const Tensor& gu, Tensor& dgu) {
  check_swiglu(gu, dy, "swiglu_backward", "dy");
  WEFT_CHECK(dgu.shape() == gu.shape() && dgu.dtype() == gu.dtype(),
             "swiglu_backward: dgu must be {} {} like gu, got {} {}", dtype_name(gu.dtype()),
             gu.shape(), dtype_name(dgu.dtype()), dgu.shape());
  if (gu.numel() == 0) return;
  WEFT_CHECK(dgu.raw() != gu.raw() && dgu.raw() != dy.raw(),
             "swiglu_backward cannot write dgu over gu or dy");
  return detail::dispatch(ec, "swiglu_backward", {&dy, &gu, &dgu},
                          [&]<Backend B>() { return impl::swiglu_backward<B>(ec, dy, gu, dgu); });
}

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

void convert(const ExecContext& ec, const Tensor& src, Tensor& dst) {
  WEFT_CHECK(src.numel() == dst.numel(), "convert: src has {} elements, dst {}", src.numel(),
             dst.numel());
  const bool host = ec.device().is_cpu() && src.device().is_cpu() && dst.device().is_cpu();
  if (host && src.dtype() == DType::f32 && dst.dtype() == DType::bf16) {
    cpu::narrow_to_bf16(ec, src.data<float>(), dst.bf16_data(), src.numel());
  } else if (host && src.dtype() == DType::bf16 && dst.dtype() == DType::f32) {
    cpu::widen_bf16(ec, src.bf16_data(), dst.data<float>(), src.numel());
  } else {
    dst.copy_from(src);
  }
}

}  // namespace weft::kernels
