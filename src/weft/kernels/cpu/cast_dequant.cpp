// dequantize on the CPU (kernels/impl/cast.h): the vector kernels of
// cast_simd.h for whole vectors and blocks — row-wise along the rows, the
// column-wise copy by strips of 16 of its rows transposed back as bytes —
// and the baseline code of cast_blocks.h for the rest.
#include <algorithm>
#include <array>
#include <cmath>

#include "weft/kernels/cpu/cast_block128.h"
#include "weft/kernels/cpu/cast_blocks.h"
#include "weft/kernels/cpu/cast_passes.h"
#include "weft/kernels/impl/cast.h"

namespace weft::kernels::impl {

namespace {

using namespace cpu;
using namespace cpu::cast_detail;

// One dequantize call: the stored matrix (rows, cols) — (q.rows, q.cols)
// row-wise, (q.cols, q.rows) column-wise — its element (i, j) going to out
// (i, j), or to out (j, i) for the column-wise copy.
struct Dequant {
  const QuantizedTensor& q;
  bool columnwise;
  std::array<float, 256> table{};        // the element codes' values
  std::array<float, 256> block_scale{};  // e8m0 (MXFP8) or e4m3 (NVFP4) scale codes' values
  int64_t rows = 0, cols = 0, out_row = 0, out_col = 0, bc = 0, br = 0, scale_cols = 0;
  const uint8_t* d = nullptr;
  const uint8_t* s = nullptr;
  float* o = nullptr;
  float t = 1.0f;
};

Dequant make_dequant(const QuantizedTensor& q, bool columnwise, Tensor& out) {
  const Tensor& data = columnwise ? q.col_data : q.data;
  const Tensor& sc = columnwise ? q.col_scale_inv : q.scale_inv;
  Dequant z{.q = q, .columnwise = columnwise};
  for (int v = 0; v < 256; ++v) {
    const auto b = static_cast<uint8_t>(v);
    z.table[static_cast<size_t>(v)] = q.dtype == DType::e4m3   ? e4m3_to_f32(b)
                                      : q.dtype == DType::e5m2 ? e5m2_to_f32(b)
                                                               : e2m1_to_f32(b);
    z.block_scale[static_cast<size_t>(v)] =
        q.mode == ScalingMode::block_1x32 ? e8m0_to_f32(b) : e4m3_to_f32(b);
  }
  z.rows = columnwise ? q.cols : q.rows;
  z.cols = columnwise ? q.rows : q.cols;
  z.out_row = columnwise ? 1 : z.cols;
  z.out_col = columnwise ? q.cols : 1;
  z.bc = scaling_block_cols(q.mode);
  z.br = scaling_block_rows(q.mode);
  z.scale_cols = sc.shape().last();
  z.d = static_cast<const uint8_t*>(data.raw());
  z.s = static_cast<const uint8_t*>(sc.raw());
  z.o = out.data<float>();
  z.t = q.tensor_scale_inv;
  return z;
}

// Row-wise, elements [0, done) of stored row r through the vector kernels k
// (whole vectors or blocks); returns done.
int64_t simd_row(const Dequant& z, const cast_simd::Kernels& k, int64_t r) {
  const int fmt = simd_format(z.q.dtype);
  float* orow = z.o + r * z.out_row;
  if (z.q.mode == ScalingMode::tensor) {
    const int64_t done = z.cols / 16 * 16;
    k.dequant_tensor(fmt, z.d + r * z.cols, z.t, done, orow);
    return done;
  }
  const int64_t blocks = z.cols / z.bc;
  const bool fp4 = z.q.dtype == DType::e2m1;
  const float second = z.q.mode == ScalingMode::block_1x32 ? 1.0f : z.t;
  k.dequant_blocks(fmt, static_cast<int>(z.bc), z.d + (fp4 ? r * z.cols / 2 : r * z.cols),
                   z.block_scale.data(), z.s + (r / z.br) * z.scale_cols, second, blocks, orow);
  return blocks * z.bc;
}

// A block whose scale is NaN (it held a NaN when it was quantized) decodes to
// that NaN throughout: a NaN element's product with it would keep the sign of
// either factor, as the compiler happens to order the multiplication.
//
// Stored row r from element `done` on by the baseline code (all of it when
// there are no vector kernels).
void baseline_row(const Dequant& z, int64_t r, int64_t done) {
  const QuantizedTensor& q = z.q;
  float* orow = z.o + r * z.out_row;
  const uint8_t* d = z.d;
  if (q.mode == ScalingMode::tensor) {
    const uint8_t* drow = d + r * z.cols;
    if (z.columnwise) {
      for (int64_t c = done; c < z.cols; ++c) orow[c * z.out_col] = z.table[drow[c]] * z.t;
    } else {
      dequant_tensor(drow + done, z.table.data(), z.t, z.cols - done, orow + done);
    }
    return;
  }
  // Block by block: one decoded scale per block; whole blocks of a
  // row-wise copy by the vectorized loop.
  const uint8_t* srow = z.s + (r / z.br) * z.scale_cols;
  if (!z.columnwise && done == 0) {
    const int64_t blocks = z.cols / z.bc;
    const float second = q.mode == ScalingMode::block_1x32 ? 1.0f : z.t;
    const float* table = z.table.data();
    const float* bs = z.block_scale.data();
    if (q.mode == ScalingMode::block_1x32) {
      dequant_blocks<32, false>(d, r * z.cols, table, bs, srow, second, blocks, orow);
    } else if (q.dtype == DType::e2m1) {
      dequant_blocks<16, true>(d, r * z.cols, table, bs, srow, second, blocks, orow);
    } else {
      dequant_blocks<16, false>(d, r * z.cols, table, bs, srow, second, blocks, orow);
    }
    done = blocks * z.bc;
  }
  for (int64_t c0 = done; c0 < z.cols; c0 += z.bc) {
    const int64_t len = std::min(z.bc, z.cols - c0);
    // NVFP4 decodes (q · s_block) · (1/S), in that order (q · s_block is exact).
    const bool mx = q.mode == ScalingMode::block_1x32;
    const float scale = mx ? e8m0_to_f32(srow[c0 / z.bc]) : e4m3_to_f32(srow[c0 / z.bc]);
    const float second = mx ? 1.0f : z.t;
    if (std::isnan(scale)) {
      for (int64_t c = 0; c < len; ++c) orow[(c0 + c) * z.out_col] = scale;
      continue;
    }
    const int64_t i0 = r * z.cols + c0;
    if (q.dtype == DType::e2m1) {
      for (int64_t c = 0; c < len; ++c) {
        const int64_t i = i0 + c;
        orow[(c0 + c) * z.out_col] = z.table[(d[i / 2] >> ((i % 2) * 4)) & 0xfu] * scale * second;
      }
    } else {
      for (int64_t c = 0; c < len; ++c) {
        orow[(c0 + c) * z.out_col] = z.table[d[i0 + c]] * scale * second;
      }
    }
  }
}

// The column-wise copy's rows [0, nj) (nj a multiple of 16), elements [0,
// ni) of each (ni a multiple of 16), by the vector kernels' strips.
void simd_columns(const ExecContext& ec, const Dequant& z, const cast_simd::Kernels& k, int64_t nj,
                  int64_t ni) {
  const int fmt = simd_format(z.q.dtype);
  const bool tensor = z.q.mode == ScalingMode::tensor, fp4 = z.q.dtype == DType::e2m1;
  const int bc = tensor ? 16 : static_cast<int>(z.bc);
  const float second = z.q.mode == ScalingMode::block_1x32 ? 1.0f : z.t;
  const int64_t ldc = fp4 ? z.cols / 2 : z.cols;
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
  for (int64_t j0 = 0; j0 < nj; j0 += 16) {
    // Stored row j (x's column j) goes to column j of out; 16x16 scales
    // change every 16 stored rows, so each strip reads one scale row.
    const uint8_t* cs = tensor ? nullptr : z.s + (j0 / z.br) * z.scale_cols;
    const int64_t lds = z.br == 1 ? z.scale_cols : 0;
    k.dequant_cols(fmt, bc, z.d + j0 * ldc, ldc, z.block_scale.data(), cs, lds, second, ni,
                   z.o + j0, z.out_col);
  }
}

}  // namespace

template <>
void dequantize<Backend::cpu>(const ExecContext& ec, const QuantizedTensor& q, bool columnwise,
                              Tensor& out) {
  if (is_block128(q.mode)) {
    dequantize_block128(ec, q, columnwise, out);
    return;
  }
  const Dequant z = make_dequant(q, columnwise, out);
  const cast_simd::Kernels* k = cast_kernels();
  // Column-wise: the vector strips cover rows [0, nj) up to element ni.
  const int64_t nj = k != nullptr && columnwise ? z.rows / 16 * 16 : 0;
  const int64_t ni = z.cols / 16 * 16;
  if (nj > 0 && ni > 0) simd_columns(ec, z, *k, nj, ni);
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
  for (int64_t r = 0; r < z.rows; ++r) {
    int64_t done = 0;
    if (r < nj) {
      done = ni;
    } else if (k != nullptr && !columnwise) {
      done = simd_row(z, *k, r);
    }
    if (done < z.cols) baseline_row(z, r, done);
  }
}

}  // namespace weft::kernels::impl
