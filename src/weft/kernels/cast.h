// Casts to and from the low-precision formats of core/quantized.h: the
// quantize kernels the FP8/MXFP8/NVFP4 recipes run right before a GEMM, with
// the amax as a by-product, and the dequantize kernels the CPU's exact
// emulation multiplies with.
//
// Scale rules (Transformer Engine's, checked against its code):
//   tensor       q = sat(x · scale); decode scale 1/scale. The recipe picks
//                scale (delayed: from the amax history; current: fp8_max / amax).
//   block_1x32   MXFP8: e = the biased exponent of amax_block / fp8_max,
//                rounded up when its mantissa is not zero (so the block's
//                largest element never saturates); a zero amax gives e = 0.
//                q = sat(x · 2^(127-e)), except e = 0 multiplies by 1 (TE's
//                exp2f_rcp); the decode scale is the e8m0 value 2^(e-127).
//   block_1x16,  NVFP4: S = fp8_max · fp4_max / amax_tensor (1 when the amax
//   block_16x16  is 0), block decode scale s = e4m3(amax_block / fp4_max · S)
//                (round to nearest even), q = sat(x · min(1 / (s · (1/S)),
//                f32_max)); decode: q · s · (1/S). 16x16 tiles share one s.
//   block_1x128, fp8-block: s = fp8_block_scale(amax_block, fp8_max), a power
//   block_128x128 of two; q = sat(x · s); decode scale 1/s, stored as f32.
//                128x128 tiles share one s.
// Every element conversion rounds to nearest even and saturates (satfinite),
// bit for bit as dtype.h's f32_to_e4m3 / e5m2 / e2m1 — or, for e2m1 with
// stochastic rounding, to one of the two neighbours with probabilities that
// make the expected value exact.
#pragma once

#include <cstdint>

#include "weft/core/exec_context.h"
#include "weft/core/quantized.h"

namespace weft::kernels {

struct QuantizeConfig {
  ScalingMode mode = ScalingMode::tensor;
  DType dtype = DType::e4m3;  // e4m3 / e5m2 (tensor, 1x32, 1x128, 128x128), e2m1 (1x16, 16x16)
  bool rowwise = true;        // make data / scale_inv
  bool columnwise = false;    // make col_data / col_scale_inv (the transpose, quantized)
  // Per-tensor scaling: the encode scale (q = x · scale).
  float scale = 1.0f;
  // NVFP4: the amax the per-tensor scale derives from — the tensor's amax
  // reduced over a group, so that shards quantize as the whole would; < 0:
  // this tensor's own amax.
  float global_amax = -1.0f;
  // Stochastic rounding (e2m1): element (r, c) of the row-wise data draws
  // kernels::uniform_at(seed, offset, r·cols + c); element (c, r) of the
  // column-wise data draws offset + rows·cols + c·rows + r. A call consumes
  // 2·rows·cols numbers.
  bool stochastic = false;
  uint64_t seed = 0, offset = 0;
  // Whether the caller reads q.amax. On a GPU the amax travels back to the
  // host (a synchronization with the stream); false leaves q.amax NaN there
  // (the CPU sets it regardless).
  bool want_amax = true;
  // Delayed scaling's record without a host read: this quantization's amax
  // folded into element amax_slot of amax_accumulator (i32 storage holding
  // the bits of a non-negative f32, on x's device) as a running max, on the
  // stream; a NaN amax is dropped (fmax's rule). Undefined: nothing folded.
  Tensor amax_accumulator{};
  int64_t amax_slot = 0;
};

// The value amax_accumulator's element holds (0 for none folded yet).
float accumulated_amax(uint32_t bits);

// fp8-block's encode scale for a block whose largest |x| is `amax`: the
// power of two at or below fp8_max / amax (Transformer Engine's
// Float8BlockScaling with power-of-two scales), so that the block's largest
// element never saturates and decoding by 1/s is exact; 1 when amax is 0,
// Inf or NaN.
float fp8_block_scale(float amax, float fp8_max);

// max |x| over a f32 or bf16 tensor (NaN when an element is NaN).
float amax(const ExecContext& ec, const Tensor& x);

// x (rows, cols) f32 or bf16 (rank > 2 viewed as rows x last dim) -> q.
// Buffers already in q are reused when their shape and dtype fit. Sets
// q.amax = amax(x) (on a GPU only when cfg.want_amax). e2m1 needs an even cols (and an even rows
// column-wise).
void quantize(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
              QuantizedTensor& q);

// q -> out f32 (rows, cols), x's layout: the values of the row-wise data, or
// of the column-wise copy put back in x's layout (what a GEMM reading the
// copy multiplies). Exact: every decoded value times its scales is an f32.
void dequantize(const ExecContext& ec, const QuantizedTensor& q, bool columnwise, Tensor& out);

// The random Hadamard transform NVFP4 applies to the wgrad GEMM's inputs,
// fused with the transpose that makes their column-wise copies:
// x (rows, cols) f32 -> out (cols, rows) f32, each run of 16 consecutive
// elements v of a row of xᵀ replaced by v · H · S, where H is the 16x16
// Sylvester-Hadamard matrix over 4 (H·Hᵀ = I) and S = diag(±1) with -1 at
// the bits set in `signs`. Applied to both operands of A·Bᵀ it leaves the
// product unchanged: (A·HS)(B·HS)ᵀ = A·Bᵀ. rows must be a multiple of 16.
void hadamard16_transpose(const ExecContext& ec, const Tensor& x, uint16_t signs, Tensor& out);

}  // namespace weft::kernels
