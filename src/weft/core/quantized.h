// QuantizedTensor: a 2-D tensor in a low-precision format with its scales —
// what the FP8, MXFP8 and NVFP4 recipes hand to a GEMM.
//
// A matrix x (rows, cols) is stored as data q (rows, cols) in `dtype` (fp8
// e4m3/e5m2, or fp4 e2m1 packed two to a byte) and decode scales ("inverse
// scales", TE's scale_inv) s, so that x ≈ q · s:
//
//   mode         blocks               s                                 dtype
//   tensor       the whole matrix     one f32 (tensor_scale_inv)        e4m3, e5m2
//   block_1x32   32 along a row       (rows, ⌈cols/32⌉) e8m0            e4m3, e5m2 (MXFP8)
//   block_1x16   16 along a row       (rows, ⌈cols/16⌉) e4m3 · f32      e2m1 (NVFP4)
//   block_16x16  16 x 16 tiles        (⌈rows/16⌉, ⌈cols/16⌉) e4m3 · f32 e2m1 (NVFP4 weights)
//   block_1x128  128 along a row      (rows, ⌈cols/128⌉) f32            e4m3, e5m2 (fp8-block)
//   block_128x128 128 x 128 tiles     (⌈rows/128⌉, ⌈cols/128⌉) f32      e4m3, e5m2 (its weights)
//
// NVFP4's two levels: x ≈ q · s_block · tensor_scale_inv, with the e4m3
// block scale and the f32 per-tensor scale. The last block of a row (or
// tile) is ragged when cols is not a multiple of the block size: it holds
// the remaining elements and its scale covers those only.
//
// fp8-block (DeepSeek-V3's recipe, Transformer Engine's Float8BlockScaling):
// each 1x128 block or 128x128 tile has its own f32 decode scale, a power of
// two, so that encoding and decoding are exact multiplications.
//
// The column-wise copy is what the backward GEMMs read: the transpose xᵀ
// (cols, rows) quantized row-wise, so its blocks run down the columns of x
// (MXFP8's 32x1 blocks, NVFP4's 16x1). It is stored transposed so that every
// quantized GEMM is A (m, k) · B (n, k)ᵀ with both operands blocked along k,
// the layout FP8 tensor cores take. Under per-tensor and 16x16 scaling the
// column-wise copy holds the same values as the row-wise data, transposed.
#pragma once

#include <cstdint>

#include "weft/core/tensor.h"

namespace weft {

enum class ScalingMode : uint8_t {
  tensor,
  block_1x32,
  block_1x16,
  block_16x16,
  block_1x128,
  block_128x128
};
const char* scaling_mode_name(ScalingMode m);

// Elements per block along a row (1 for per-tensor scaling: no blocks).
int64_t scaling_block_cols(ScalingMode m);
// Rows per block (16 for 16x16 tiles, 128 for 128x128 tiles, else 1).
int64_t scaling_block_rows(ScalingMode m);
// The shape of the block scales of a (rows, cols) matrix ({1} for per-tensor).
Shape scale_shape(ScalingMode m, int64_t rows, int64_t cols);
// The dtype of the block scales (f32 for per-tensor).
DType scale_dtype(ScalingMode m);

// The largest finite value of a low-precision element type (448, 57344, 6).
float dtype_max(DType t);

struct QuantizedTensor {
  ScalingMode mode = ScalingMode::tensor;
  DType dtype = DType::e4m3;
  int64_t rows = 0, cols = 0;
  Tensor data;       // (rows, cols) in dtype; undefined when only column-wise was made
  Tensor scale_inv;  // scale_shape(mode, rows, cols) in scale_dtype(mode)
  Tensor col_data;   // (cols, rows): xᵀ quantized row-wise; undefined when not made
  Tensor col_scale_inv;
  // Per-tensor: the decode scale of every element. NVFP4: the second-level
  // (per-tensor) decode scale. MXFP8 and fp8-block: 1.
  float tensor_scale_inv = 1.0f;
  // The largest |x| of the high-precision input (the amax the recipes record).
  float amax = 0.0f;

  bool has_rowwise() const { return data.defined(); }
  bool has_columnwise() const { return col_data.defined(); }
  // Bytes of data and scales (both copies when both exist), what a gather
  // of this tensor would move.
  int64_t storage_bytes() const;
};

}  // namespace weft
