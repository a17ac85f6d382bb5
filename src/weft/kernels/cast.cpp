#include "weft/kernels/cast.h"

#include "weft/kernels/cpu/cast.h"
#include "weft/kernels/cuda/cast.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

namespace {

void check_input(const Tensor& x, const char* what) {
  WEFT_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::bf16,
             "{} reads f32 or bf16, got a {} tensor of shape {}", what, dtype_name(x.dtype()),
             x.shape());
}

}  // namespace

float amax(const ExecContext& ec, const Tensor& x) {
  check_input(x, "amax");
  return detail::dispatch(
      ec, "amax", {&x}, [&] { return cpu::amax(ec, x); }, [&] { return cuda::amax(ec, x); });
}

void quantize(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
              QuantizedTensor& q) {
  check_input(x, "quantize");
  WEFT_CHECK(x.dim() >= 1, "quantize needs a tensor of rank >= 1");
  detail::dispatch(
      ec, "quantize", {&x}, [&] { cpu::quantize(ec, x, cfg, q); },
      [&] { cuda::quantize(ec, x, cfg, q); });
}

void dequantize(const ExecContext& ec, const QuantizedTensor& q, bool columnwise, Tensor& out) {
  const Tensor& data = columnwise ? q.col_data : q.data;
  WEFT_CHECK(data.defined(), "dequantize: the quantized tensor has no {} data",
             columnwise ? "column-wise" : "row-wise");
  WEFT_CHECK(out.dtype() == DType::f32 && out.numel() == q.rows * q.cols,
             "dequantize writes f32 ({}, {}), got {} {}", q.rows, q.cols, dtype_name(out.dtype()),
             out.shape());
  detail::dispatch(
      ec, "dequantize", {&data, &out}, [&] { cpu::dequantize(ec, q, columnwise, out); },
      [&] { cuda::dequantize(ec, q, columnwise, out); });
}

void hadamard16_transpose(const ExecContext& ec, const Tensor& x, uint16_t signs, Tensor& out) {
  detail::dispatch(ec, "hadamard16_transpose", {&x, &out},
                   [&] { cpu::hadamard16_transpose(ec, x, signs, out); });
}

}  // namespace weft::kernels
