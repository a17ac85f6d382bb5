#include "weft/kernels/cast.h"

#include "weft/kernels/cpu/cast.h"
#include "weft/kernels/cuda/cast.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

float amax(const ExecContext& ec, const Tensor& x) {
  return detail::dispatch(
      ec, "amax", {&x}, [&] { return cpu::amax(ec, x); }, [&] { return cuda::amax(ec, x); });
}

void quantize(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
              QuantizedTensor& q) {
  detail::dispatch(
      ec, "quantize", {&x}, [&] { cpu::quantize(ec, x, cfg, q); },
      [&] { cuda::quantize(ec, x, cfg, q); });
}

void dequantize(const ExecContext& ec, const QuantizedTensor& q, bool columnwise, Tensor& out) {
  const Tensor& data = columnwise ? q.col_data : q.data;
  detail::dispatch(
      ec, "dequantize", {&data, &out}, [&] { cpu::dequantize(ec, q, columnwise, out); },
      [&] { cuda::dequantize(ec, q, columnwise, out); });
}

void hadamard16_transpose(const ExecContext& ec, const Tensor& x, uint16_t signs, Tensor& out) {
  detail::dispatch(ec, "hadamard16_transpose", {&x, &out},
                   [&] { cpu::hadamard16_transpose(ec, x, signs, out); });
}

}  // namespace weft::kernels
