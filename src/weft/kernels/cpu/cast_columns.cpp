// The column-wise pass of the CPU quantize kernel (cast_passes.h): the
// quantized transpose. The vector kernels take strips of 16 columns of x in
// bands of rows, block scales down the columns, codes transposed as bytes;
// the baseline code transposes tiles of f32 and quantizes their rows as
// segments of rows of xᵀ — for everything where there are no vector kernels,
// for stochastic rounding, bf16 inputs and the edges the strips leave.
#include <algorithm>
#include <array>
#include <cstring>

#include "weft/kernels/cpu/cast_passes.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace weft::kernels::cpu {

namespace {

// Rows of the source taken per column-wise tile: a multiple of every block
// length, so a tile's segments of xᵀ start at block boundaries.
constexpr int64_t kTileRows = 128;
constexpr int64_t kTileCols = 32;

#if defined(__x86_64__)
// A full tile, transposed: t[c · kTileRows + r] = src[r · ld + c], by 8x8
// blocks in registers.
[[gnu::target("avx2")]] void transpose_tile_avx2(const float* src, int64_t ld, float* t) {
  for (int64_t rb = 0; rb < kTileRows; rb += 8) {
    for (int64_t cb = 0; cb < kTileCols; cb += 8) {
      __m256 v[8], w[8];
      for (int i = 0; i < 8; ++i) v[i] = _mm256_loadu_ps(src + (rb + i) * ld + cb);
      for (int i = 0; i < 8; i += 2) {
        w[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
        w[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
      }
      for (int i = 0; i < 8; i += 4) {
        v[i] = _mm256_shuffle_ps(w[i], w[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        v[i + 1] = _mm256_shuffle_ps(w[i], w[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        v[i + 2] = _mm256_shuffle_ps(w[i + 1], w[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        v[i + 3] = _mm256_shuffle_ps(w[i + 1], w[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
      }
      // v[0..3]: columns 0,1,2,3 (low lanes) / 4,5,6,7 (high) of rows 0-3; v[4..7] rows 4-7.
      for (int j = 0; j < 4; ++j) {
        float* lo = t + (cb + j) * kTileRows + rb;
        float* hi = t + (cb + j + 4) * kTileRows + rb;
        _mm256_storeu_ps(lo, _mm256_permute2f128_ps(v[j], v[j + 4], 0x20));
        _mm256_storeu_ps(hi, _mm256_permute2f128_ps(v[j], v[j + 4], 0x31));
      }
    }
  }
}
#else
void transpose_tile_avx2(const float*, int64_t, float*) {}
#endif

float load(const Tensor& x, int64_t i) {
  return x.dtype() == DType::f32 ? x.data<float>()[i] : bf16_to_f32(x.bf16_data()[i]);
}

// Rows [r_begin, r_end) x columns [c_begin, c_end) of x by the baseline
// tiles (r_begin a multiple of the block length).
void baseline_columns(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                      const SegmentParams& p, const std::vector<uint8_t>& tiles_t,
                      const ColumnsOut& o, int64_t r_begin, int64_t r_end, int64_t c_begin,
                      int64_t c_end) {
  const int64_t rows = x.numel() / x.shape().last(), cols = x.shape().last();
  const int64_t tr = (rows + 15) / 16;
  const int64_t elem_stride = cfg.stochastic ? 1 : 0;
  const int64_t row_tiles = (r_end - r_begin + kTileRows - 1) / kTileRows;
  const int64_t col_tiles = (c_end - c_begin + kTileCols - 1) / kTileCols;
  const uint64_t col_stream = cfg.offset + static_cast<uint64_t>(rows * cols);
  SegmentParams pc = p;
  pc.stream = false;  // segments of at most a tile's rows
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2");
#else
  const bool avx2 = false;
#endif
#pragma omp parallel for num_threads(ec.threads()) schedule(static) collapse(2)
  for (int64_t ct = 0; ct < col_tiles; ++ct) {
    for (int64_t rt = 0; rt < row_tiles; ++rt) {
      const int64_t r0 = r_begin + rt * kTileRows, nr = std::min(kTileRows, r_end - r0);
      const int64_t c0 = c_begin + ct * kTileCols, nc = std::min(kTileCols, c_end - c0);
      std::array<float, kTileRows * kTileCols> t{};
      if (x.dtype() == DType::f32 && nr == kTileRows && nc == kTileCols && avx2) {
        transpose_tile_avx2(x.data<float>() + r0 * cols + c0, cols, t.data());
      } else {
        for (int64_t r = 0; r < nr; ++r) {
          for (int64_t c = 0; c < nc; ++c)
            t[static_cast<size_t>(c * kTileRows + r)] = load(x, (r0 + r) * cols + c0 + c);
        }
      }
      for (int64_t c = 0; c < nc; ++c) {
        const int64_t xc = c0 + c;  // the row of xᵀ
        uint8_t* row_scales = cfg.mode == ScalingMode::tensor ? nullptr : o.sc + xc * o.scale_cols;
        const uint8_t* tile_row = nullptr;
        if (cfg.mode == ScalingMode::block_16x16) {
          row_scales = nullptr;  // written below
          tile_row = tiles_t.data() + (xc / 16) * tr;
        }
        quantize_segment(pc, t.data() + c * kTileRows, nr, r0, o.data, xc * rows + r0, row_scales,
                         tile_row,
                         col_stream + static_cast<uint64_t>((xc * rows + r0) * elem_stride));
      }
    }
  }
}

}  // namespace

ColumnsOut prepare_columns(const QuantizeConfig& cfg, const std::vector<uint8_t>& tiles_t,
                           QuantizedTensor& q) {
  reuse(q.col_data, {q.cols, q.rows}, cfg.dtype);
  reuse(q.col_scale_inv, scale_shape(cfg.mode, q.cols, q.rows), scale_dtype(cfg.mode));
  if (cfg.mode == ScalingMode::tensor) q.col_scale_inv.data<float>()[0] = q.tensor_scale_inv;
  const ColumnsOut o{static_cast<uint8_t*>(q.col_data.raw()),
                     static_cast<uint8_t*>(q.col_scale_inv.raw()), q.col_scale_inv.shape().last(),
                     q.col_data.nbytes() >= kStreamBytes};
  if (cfg.mode == ScalingMode::block_16x16) std::memcpy(o.sc, tiles_t.data(), tiles_t.size());
  return o;
}

ColumnPlan plan_columns(const Tensor& x, const QuantizeConfig& cfg, const SegmentParams& p) {
  const int64_t cols = x.shape().last(), rows = x.numel() / std::max<int64_t>(cols, 1);
  if (p.k == nullptr) return {};
  if (cfg.mode == ScalingMode::tensor && cfg.rowwise) return {64, rows, cols, true};
  if (cfg.stochastic || x.dtype() != DType::f32) return {};
  const int64_t block = cfg.mode == ScalingMode::block_1x32 ? 32 : 16;
  // Bands whose codes make whole cache lines of the copy's rows: 64 bytes.
  const int64_t band = cfg.dtype == DType::e2m1 ? 128 : 64;
  return {band, rows / block * block, cols / 16 * 16, false};
}

void column_band(const Tensor& x, const QuantizeConfig& cfg, const SegmentParams& p,
                 const std::vector<uint8_t>& tiles_t, const QuantizedTensor& q, const ColumnsOut& o,
                 const ColumnPlan& plan, int64_t r0, int64_t n) {
  const cast_simd::Kernels& k = *p.k;
  const int64_t rows = q.rows, cols = q.cols;
  if (plan.from_codes) {
    // One scale for both copies: the column-wise codes are the row-wise ones, transposed.
    k.transpose_bytes(static_cast<const uint8_t*>(q.data.raw()) + r0 * cols, n, cols, o.data + r0,
                      rows, o.stream);
    return;
  }
  const bool fp4 = cfg.dtype == DType::e2m1;
  const int64_t block = cfg.mode == ScalingMode::block_1x32 ? 32 : 16;
  cast_simd::ColumnBand cb{.x = x.data<float>() + r0 * cols,
                           .ld = cols,
                           .nr = n,
                           .nc = plan.nc,
                           .cd = o.data + (fp4 ? r0 / 2 : r0),
                           .ldc = fp4 ? rows / 2 : rows,
                           .cs = nullptr,
                           .lds = o.scale_cols,
                           .stream = o.stream};
  if (cfg.mode == ScalingMode::block_1x32 || cfg.mode == ScalingMode::block_1x16) {
    cb.cs = o.sc + r0 / block;
  }
  if (cfg.mode == ScalingMode::block_1x32 && cfg.rowwise) {  // the band's rows are made
    cb.rc = static_cast<const uint8_t*>(q.data.raw()) + r0 * cols;
    cb.ldr = cols;
    cb.rs = static_cast<const uint8_t*>(q.scale_inv.raw()) + r0 * q.scale_inv.shape().last();
    cb.ldrs = q.scale_inv.shape().last();
  }
  const int fmt = simd_format(cfg.dtype);
  switch (cfg.mode) {
    case ScalingMode::tensor: k.tensor_cols(fmt, cb, p.scale); break;
    case ScalingMode::block_1x32: k.mx_cols(fmt, cb, 1.0f / dtype_max(cfg.dtype)); break;
    case ScalingMode::block_1x16: k.nv_cols(cb, p.s_enc, p.enc_scale, nullptr, 0); break;
    default: k.nv_cols(cb, p.s_enc, p.enc_scale, tiles_t.data() + r0 / 16, (rows + 15) / 16);
  }
}

void column_rest(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                 const SegmentParams& p, const std::vector<uint8_t>& tiles_t, const ColumnsOut& o,
                 const ColumnPlan& plan) {
  const int64_t cols = x.shape().last(), rows = x.numel() / std::max<int64_t>(cols, 1);
  if (plan.band == 0) {
    baseline_columns(ec, x, cfg, p, tiles_t, o, 0, rows, 0, cols);
    return;
  }
  if (plan.from_codes) return;
  if (plan.nc < cols) baseline_columns(ec, x, cfg, p, tiles_t, o, 0, rows, plan.nc, cols);
  if (plan.nr < rows && plan.nc > 0) {
    baseline_columns(ec, x, cfg, p, tiles_t, o, plan.nr, rows, 0, plan.nc);
  }
}

void quantize_columns(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                      const SegmentParams& p, const std::vector<uint8_t>& tiles_t,
                      QuantizedTensor& q) {
  const ColumnsOut o = prepare_columns(cfg, tiles_t, q);
  const ColumnPlan plan = plan_columns(x, cfg, p);
  const int64_t bands = plan.band == 0 ? 0 : (plan.nr + plan.band - 1) / plan.band;
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
  for (int64_t b = 0; b < bands; ++b) {
    const int64_t r0 = b * plan.band;
    column_band(x, cfg, p, tiles_t, q, o, plan, r0, std::min(plan.band, plan.nr - r0));
  }
  column_rest(ec, x, cfg, p, tiles_t, o, plan);
}

}  // namespace weft::kernels::cpu
