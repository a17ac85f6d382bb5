#include "weft/kernels/cast.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>

#include "weft/kernels/dispatch.h"
#include "weft/kernels/impl/cast.h"

namespace weft::kernels {

namespace {

void check_input(const Tensor& x, const char* what) {
  WEFT_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::bf16,
             "{} reads f32 or bf16, got a {} tensor of shape {}", what, dtype_name(x.dtype()),
             x.shape());
}

}  // namespace

float fp8_block_scale(float amax, float fp8_max) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return 1.0f;
  float s = fp8_max / amax;
  if (!std::isfinite(s)) s = FLT_MAX;
  // Clear the mantissa: the power of two at or below s (s is normal: it is
  // at least fp8_max / FLT_MAX).
  return std::bit_cast<float>(std::bit_cast<uint32_t>(s) & 0xff800000u);
}

float amax(const ExecContext& ec, const Tensor& x) {
  check_input(x, "amax");
  return detail::dispatch(ec, "amax", {&x}, [&]<Backend B>() { return impl::amax<B>(ec, x); });
}

void quantize(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
              QuantizedTensor& q) {
  check_input(x, "quantize");
  WEFT_CHECK(x.dim() >= 1, "quantize needs a tensor of rank >= 1");
  WEFT_CHECK(cfg.dtype == DType::e4m3 || cfg.dtype == DType::e5m2 || cfg.dtype == DType::e2m1,
             "quantize: {} is not an fp8 or fp4 element type", dtype_name(cfg.dtype));
  const bool fp4 = cfg.dtype == DType::e2m1;
  const bool nvfp4_mode =
      cfg.mode == ScalingMode::block_1x16 || cfg.mode == ScalingMode::block_16x16;
  WEFT_CHECK(fp4 == nvfp4_mode, "quantize: {} scaling stores {}, not {}",
             scaling_mode_name(cfg.mode), nvfp4_mode ? "fp4_e2m1" : "fp8 e4m3 or e5m2",
             dtype_name(cfg.dtype));
  WEFT_CHECK(cfg.rowwise || cfg.columnwise, "quantize: neither row-wise nor column-wise asked for");
  WEFT_CHECK(!cfg.stochastic || fp4, "stochastic rounding is implemented for fp4_e2m1 only");
  const int64_t cols = x.shape().last(), rows = x.numel() / std::max<int64_t>(cols, 1);
  WEFT_CHECK(!fp4 || ((!cfg.rowwise || cols % 2 == 0) && (!cfg.columnwise || rows % 2 == 0)),
             "quantize to fp4_e2m1 packs two elements a byte: a ({}, {}) matrix needs an even "
             "row length (and an even row count column-wise)",
             rows, cols);
  WEFT_CHECK(cfg.mode != ScalingMode::tensor || (std::isfinite(cfg.scale) && cfg.scale > 0.0f),
             "quantize: the per-tensor scale must be a finite positive number, got {} (the "
             "recipes derive it from an amax: check the amax history)",
             cfg.scale);
  const Tensor& acc = cfg.amax_accumulator;
  WEFT_CHECK(!acc.defined() || (acc.dtype() == DType::i32 && cfg.amax_slot >= 0 &&
                                cfg.amax_slot < acc.numel() && acc.device() == x.device()),
             "quantize: the amax accumulator must be an i32 tensor on {} with element {}, got {} "
             "{} on {}",
             x.device(), cfg.amax_slot, dtype_name(acc.dtype()), acc.shape(), acc.device());
  detail::dispatch(ec, "quantize", {&x}, [&]<Backend B>() { impl::quantize<B>(ec, x, cfg, q); });
  // The CPU's fold (a GPU's runs on its stream inside impl::quantize).
  if (acc.defined() && x.device().is_cpu() && !std::isnan(q.amax)) {
    auto* slot = static_cast<uint32_t*>(acc.raw()) + cfg.amax_slot;
    *slot = std::max(*slot, std::bit_cast<uint32_t>(std::fabs(q.amax)));
  }
}

float accumulated_amax(uint32_t bits) { return std::bit_cast<float>(bits); }

void dequantize(const ExecContext& ec, const QuantizedTensor& q, bool columnwise, Tensor& out) {
  const Tensor& data = columnwise ? q.col_data : q.data;
  WEFT_CHECK(data.defined(), "dequantize: the quantized tensor has no {} data",
             columnwise ? "column-wise" : "row-wise");
  WEFT_CHECK(out.dtype() == DType::f32 && out.numel() == q.rows * q.cols,
             "dequantize writes f32 ({}, {}), got {} {}", q.rows, q.cols, dtype_name(out.dtype()),
             out.shape());
  // The stored matrix (sr, scols): (rows, cols), or (cols, rows) column-wise.
  const int64_t sr = columnwise ? q.cols : q.rows, scols = columnwise ? q.rows : q.cols;
  WEFT_CHECK(data.dtype() == q.dtype && data.numel() == sr * scols,
             "dequantize: the {} data is {} {}, not {} of ({}, {}) elements",
             columnwise ? "column-wise" : "row-wise", dtype_name(data.dtype()), data.shape(),
             dtype_name(q.dtype), sr, scols);
  if (q.mode != ScalingMode::tensor) {  // per-tensor: tensor_scale_inv
    const Tensor& sc = columnwise ? q.col_scale_inv : q.scale_inv;
    const Shape want = scale_shape(q.mode, sr, scols);
    WEFT_CHECK(sc.defined() && sc.dtype() == scale_dtype(q.mode) && sc.numel() == want.numel(),
               "dequantize: a {} tensor's scales are {}, expected {} {}", scaling_mode_name(q.mode),
               sc.defined() ? format("{} {}", dtype_name(sc.dtype()), sc.shape()) : "missing",
               dtype_name(scale_dtype(q.mode)), want);
  }
  detail::dispatch(ec, "dequantize", {&data, &out},
                   [&]<Backend B>() { impl::dequantize<B>(ec, q, columnwise, out); });
}

void hadamard16_transpose(const ExecContext& ec, const Tensor& x, uint16_t signs, Tensor& out) {
  WEFT_CHECK(x.dtype() == DType::f32 && out.dtype() == DType::f32,
             "hadamard16_transpose reads and writes f32");
  const int64_t cols = x.shape().last(), rows = x.numel() / std::max<int64_t>(cols, 1);
  WEFT_CHECK(rows % 16 == 0, "hadamard16_transpose needs a multiple of 16 rows, got {}", rows);
  WEFT_CHECK(out.numel() == rows * cols, "hadamard16_transpose writes ({}, {}), got {}", cols, rows,
             out.shape());
  detail::dispatch_cpu_only(ec, "hadamard16_transpose", {&x, &out},
                            [&] { impl::hadamard16_transpose<Backend::cpu>(ec, x, signs, out); });
}

}  // namespace weft::kernels
