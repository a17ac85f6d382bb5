#include "weft/kernels/impl/cast.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "weft/kernels/cpu/cast_blocks.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "weft/kernels/random.h"

namespace weft::kernels::impl {

namespace {

using namespace cpu::cast_detail;

// out[i] = encode(x[i] · s).
template <int Man, int Bias, uint32_t MaxCode, int SignShift, uint32_t NanCode>
WEFT_CAST_CLONES void encode_scaled(const float* x, float s, uint8_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = encode_one<Man, Bias, MaxCode, SignShift, NanCode>(x[i] * s);
}

inline void encode_rne(DType t, const float* x, float s, uint8_t* out, int64_t n) {
  switch (t) {
    case DType::e4m3: encode_scaled<3, 7, 0x7e, 7, 0x7f>(x, s, out, n); return;
    case DType::e5m2: encode_scaled<2, 15, 0x7b, 7, 0x7f>(x, s, out, n); return;
    case DType::e2m1: encode_scaled<1, 1, 0x7, 3, 0x7>(x, s, out, n); return;
    default: (void)format_of(t);
  }
}

// The largest |x[i]| as f32 bits with the sign cleared: an integer maximum
// (which vectorizes), ordered as the magnitudes are, with NaN above Inf.
WEFT_CAST_CLONES uint32_t abs_max_bits(const float* x, int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t a = std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu;
    m = a > m ? a : m;
  }
  return m;
}

// The block's amax, NaN when an element is NaN.
inline float block_amax(const float* x, int64_t n) {
  const uint32_t m = abs_max_bits(x, n);
  return m > 0x7f800000u ? std::numeric_limits<float>::quiet_NaN() : std::bit_cast<float>(m);
}

// ---- one segment of a row --------------------------------------------------

struct SegmentParams {
  ScalingMode mode;
  DType dtype;
  float scale;      // tensor: the encode scale
  float s_enc;      // NVFP4: the per-tensor encode scale S
  float s_dec;      // NVFP4: 1 / S
  bool stochastic;  // e2m1 only
  uint64_t seed;
  const float* enc_scale;  // NVFP4: nvfp4_encode_scale of each scale code
};

// NVFP4's block decode scale (an e4m3 code) for a block amax.
uint8_t nvfp4_block_scale(float block_amax, const SegmentParams& p) {
  return f32_to_e4m3(block_amax / 6.0f * p.s_enc);
}

float nvfp4_encode_scale(uint8_t block_scale, const SegmentParams& p) {
  return std::min(1.0f / (e4m3_to_f32(block_scale) * p.s_dec), FLT_MAX);
}

// Quantizes x[0, n), the elements at columns [c0, c0 + n) of one output row
// (c0 a multiple of the block size), into codes[0, n) (one byte each) and
// the row's block scales `scales` (indexed by block: c0 / block + j). 16x16
// tiles take their scale codes from `tile_scales` (the same indexing).
// `stream` is the random-stream index of x[0]; consecutive elements follow.
void quantize_segment(const SegmentParams& p, const float* x, int64_t n, int64_t c0, uint8_t* codes,
                      uint8_t* scales, const uint8_t* tile_scales, uint64_t stream) {
  if (p.mode == ScalingMode::tensor) {
    encode_rne(p.dtype, x, p.scale, codes, n);
    return;
  }
  const int64_t bc = scaling_block_cols(p.mode);
  // Stochastic rounding: the segment's uniforms first, all at once.
  thread_local std::vector<float> uniform;
  thread_local std::vector<uint32_t> words;
  if (p.stochastic) {
    uniform.resize(static_cast<size_t>(n));
    words.resize(static_cast<size_t>(n + 8));
    uniforms(p.seed, stream, n, words.data(), uniform.data());
  }
  // Whole blocks, then a ragged tail block.
  const int64_t full = n / bc, first = c0 / bc;
  if (p.mode == ScalingMode::block_1x32) {
    const float inv_max = 1.0f / dtype_max(p.dtype);
    if (p.dtype == DType::e4m3) {
      mx_blocks<3, 7, 0x7e, 7, 0x7f>(x, full, inv_max, codes, scales + first);
    } else {
      mx_blocks<2, 15, 0x7b, 7, 0x7f>(x, full, inv_max, codes, scales + first);
    }
  } else {
    nv_blocks(x, full, p.s_enc, p.enc_scale, tile_scales ? tile_scales + first : nullptr,
              p.stochastic ? uniform.data() : nullptr, codes, scales ? scales + first : nullptr);
  }
  for (int64_t b0 = full * bc; b0 < n; b0 += bc) {
    const int64_t len = std::min(bc, n - b0);
    const int64_t block = (c0 + b0) / bc;
    float s = 1.0f;
    if (p.mode == ScalingMode::block_1x32) {
      const uint8_t e = e8m0_round_up(block_amax(x + b0, len) * (1.0f / dtype_max(p.dtype)));
      scales[block] = e;
      s = e8m0_encode_scale(e);
    } else {
      const uint8_t sc = p.mode == ScalingMode::block_16x16
                             ? tile_scales[block]
                             : nvfp4_block_scale(block_amax(x + b0, len), p);
      if (scales) scales[block] = sc;
      s = nvfp4_encode_scale(sc, p);
    }
    if (p.stochastic) {
      for (int64_t i = 0; i < len; ++i) {
        codes[b0 + i] = e2m1_stochastic(x[b0 + i] * s, uniform[static_cast<size_t>(b0 + i)]);
      }
    } else {
      encode_rne(p.dtype, x + b0, s, codes + b0, len);
    }
  }
}

// Writes n codes at element index `at` of a data buffer (packed for e2m1,
// `at` and n even).
void store_codes(DType t, const uint8_t* codes, int64_t n, uint8_t* data, int64_t at) {
  if (t != DType::e2m1) {
    std::memcpy(data + at, codes, static_cast<size_t>(n));
    return;
  }
  pack_e2m1(codes, n, data + at / 2);
}

// Row `r` of x as f32: the row itself, or converted into `buf`.
const float* f32_row(const Tensor& x, int64_t r, int64_t cols, std::vector<float>& buf) {
  if (x.dtype() == DType::f32) return x.data<float>() + r * cols;
  buf.resize(static_cast<size_t>(cols));
  const uint16_t* src = x.bf16_data() + r * cols;
  for (int64_t c = 0; c < cols; ++c) buf[static_cast<size_t>(c)] = bf16_to_f32(src[c]);
  return buf.data();
}

float load(const Tensor& x, int64_t i) {
  return x.dtype() == DType::f32 ? x.data<float>()[i] : bf16_to_f32(x.bf16_data()[i]);
}

void reuse(Tensor& slot, const Shape& shape, DType dtype) {
  if (!slot.defined() || !(slot.shape() == shape) || slot.dtype() != dtype || !slot.sole_owner()) {
    slot = Tensor::empty(shape, dtype);
  }
}

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

// NVFP4 16x16: one e4m3 scale code per tile, into tiles (tr, tc) and the
// transposed grid tiles_t (tc, tr) for the column-wise copy.
void nvfp4_tile_scales(const ExecContext& ec, const Tensor& x, int64_t rows, int64_t cols,
                       const SegmentParams& p, std::vector<uint8_t>& tiles,
                       std::vector<uint8_t>& tiles_t) {
  const int64_t tr = (rows + 15) / 16, tc = (cols + 15) / 16;
  tiles.assign(static_cast<size_t>(tr * tc), 0);
  tiles_t.assign(tiles.size(), 0);
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
  for (int64_t bi = 0; bi < tr; ++bi) {
    std::vector<float> buf;
    std::vector<float> m(static_cast<size_t>(tc), 0.0f);
    std::vector<char> nan(static_cast<size_t>(tc), 0);
    for (int64_t r = bi * 16; r < std::min(rows, bi * 16 + 16); ++r) {
      const float* xr = f32_row(x, r, cols, buf);
      for (int64_t bj = 0; bj < tc; ++bj) {
        const int64_t c0 = bj * 16, len = std::min<int64_t>(16, cols - c0);
        const float a = block_amax(xr + c0, len);
        auto j = static_cast<size_t>(bj);
        if (std::isnan(a)) nan[j] = 1;
        m[j] = std::max(m[j], a);
      }
    }
    for (int64_t bj = 0; bj < tc; ++bj) {
      auto j = static_cast<size_t>(bj);
      const float a = nan[j] ? std::numeric_limits<float>::quiet_NaN() : m[j];
      const uint8_t code = nvfp4_block_scale(a, p);
      tiles[static_cast<size_t>(bi * tc + bj)] = code;
      tiles_t[static_cast<size_t>(bj * tr + bi)] = code;
    }
  }
}

// The row-wise copy into q.data and q.scale_inv; returns the bits of x's
// largest magnitude (NaN above every number), a by-product of the pass.
uint32_t quantize_rows(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                       const SegmentParams& p, const std::vector<uint8_t>& tiles,
                       QuantizedTensor& q) {
  const int64_t rows = q.rows, cols = q.cols, tc = (cols + 15) / 16;
  const bool fp4 = cfg.dtype == DType::e2m1;
  const int64_t elem_stride = cfg.stochastic ? 1 : 0;
  reuse(q.data, {rows, cols}, cfg.dtype);
  reuse(q.scale_inv, scale_shape(cfg.mode, rows, cols), scale_dtype(cfg.mode));
  if (cfg.mode == ScalingMode::tensor) q.scale_inv.data<float>()[0] = q.tensor_scale_inv;
  auto* data = static_cast<uint8_t*>(q.data.raw());
  auto* sc = static_cast<uint8_t*>(q.scale_inv.raw());
  const int64_t scale_cols = q.scale_inv.shape().last();
  uint32_t amax_bits = 0;
#pragma omp parallel for num_threads(ec.threads()) schedule(static) reduction(max : amax_bits)
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> buf;
    thread_local std::vector<uint8_t> codes;
    codes.resize(static_cast<size_t>(cols));
    const float* xr = f32_row(x, r, cols, buf);
    amax_bits = std::max(amax_bits, abs_max_bits(xr, cols));
    uint8_t* row_scales = cfg.mode == ScalingMode::tensor ? nullptr : sc + r * scale_cols;
    const uint8_t* tile_row =
        cfg.mode == ScalingMode::block_16x16 ? tiles.data() + (r / 16) * tc : nullptr;
    if (cfg.mode == ScalingMode::block_16x16) row_scales = nullptr;  // written below
    // fp8 codes go straight to the row; fp4 ones are packed from `codes`.
    uint8_t* out = fp4 ? codes.data() : data + r * cols;
    quantize_segment(p, xr, cols, 0, out, row_scales, tile_row,
                     cfg.offset + static_cast<uint64_t>(r * cols * elem_stride));
    if (fp4) store_codes(cfg.dtype, codes.data(), cols, data, r * cols);
  }
  if (cfg.mode == ScalingMode::block_16x16) std::memcpy(sc, tiles.data(), tiles.size());
  return amax_bits;
}

// The column-wise copy into q.col_data and q.col_scale_inv: tiles of
// kTileRows x kTileCols transposed into a buffer, each of its rows a segment
// of a row of xᵀ.
void quantize_columns(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                      const SegmentParams& p, const std::vector<uint8_t>& tiles_t,
                      QuantizedTensor& q) {
  const int64_t rows = q.rows, cols = q.cols, tr = (rows + 15) / 16;
  const int64_t elem_stride = cfg.stochastic ? 1 : 0;
  reuse(q.col_data, {cols, rows}, cfg.dtype);
  reuse(q.col_scale_inv, scale_shape(cfg.mode, cols, rows), scale_dtype(cfg.mode));
  if (cfg.mode == ScalingMode::tensor) q.col_scale_inv.data<float>()[0] = q.tensor_scale_inv;
  auto* data = static_cast<uint8_t*>(q.col_data.raw());
  auto* sc = static_cast<uint8_t*>(q.col_scale_inv.raw());
  const int64_t scale_cols = q.col_scale_inv.shape().last();
  const int64_t row_tiles = (rows + kTileRows - 1) / kTileRows;
  const int64_t col_tiles = (cols + kTileCols - 1) / kTileCols;
  const uint64_t col_stream = cfg.offset + static_cast<uint64_t>(rows * cols);
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2");
#else
  const bool avx2 = false;
#endif
#pragma omp parallel for num_threads(ec.threads()) schedule(static) collapse(2)
  for (int64_t ct = 0; ct < col_tiles; ++ct) {
    for (int64_t rt = 0; rt < row_tiles; ++rt) {
      const int64_t r0 = rt * kTileRows, nr = std::min(kTileRows, rows - r0);
      const int64_t c0 = ct * kTileCols, nc = std::min(kTileCols, cols - c0);
      std::array<float, kTileRows * kTileCols> t{};
      if (x.dtype() == DType::f32 && nr == kTileRows && nc == kTileCols && avx2) {
        transpose_tile_avx2(x.data<float>() + r0 * cols + c0, cols, t.data());
      } else if (x.dtype() == DType::f32) {
        const float* src = x.data<float>() + r0 * cols + c0;
        for (int64_t r = 0; r < nr; ++r) {
          for (int64_t c = 0; c < nc; ++c)
            t[static_cast<size_t>(c * kTileRows + r)] = src[r * cols + c];
        }
      } else {
        for (int64_t r = 0; r < nr; ++r) {
          for (int64_t c = 0; c < nc; ++c)
            t[static_cast<size_t>(c * kTileRows + r)] = load(x, (r0 + r) * cols + c0 + c);
        }
      }
      std::array<uint8_t, kTileRows> codes{};
      for (int64_t c = 0; c < nc; ++c) {
        const int64_t xc = c0 + c;  // the row of xᵀ
        uint8_t* row_scales = cfg.mode == ScalingMode::tensor ? nullptr : sc + xc * scale_cols;
        const uint8_t* tile_row = nullptr;
        if (cfg.mode == ScalingMode::block_16x16) {
          row_scales = nullptr;  // written below
          tile_row = tiles_t.data() + (xc / 16) * tr;
        }
        quantize_segment(p, t.data() + c * kTileRows, nr, r0, codes.data(), row_scales, tile_row,
                         col_stream + static_cast<uint64_t>((xc * rows + r0) * elem_stride));
        store_codes(cfg.dtype, codes.data(), nr, data, xc * rows + r0);
      }
    }
  }
  if (cfg.mode == ScalingMode::block_16x16) std::memcpy(sc, tiles_t.data(), tiles_t.size());
}

}  // namespace

template <>
float amax<Backend::cpu>(const ExecContext& ec, const Tensor& x) {
  const int64_t n = x.numel();
  constexpr int64_t kSegment = 1 << 14;
  const int64_t chunks = (n + kSegment - 1) / kSegment;
  float m = 0.0f;
  bool nan = false;
#pragma omp parallel for num_threads(ec.threads()) schedule(static) reduction(max  \
                                                                              : m) \
    reduction(||                                                                   \
              : nan)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kSegment, len = std::min(kSegment, n - begin);
    std::vector<float> buf;
    const float* p = nullptr;
    if (x.dtype() == DType::f32) {
      p = x.data<float>() + begin;
    } else {
      buf.resize(static_cast<size_t>(len));
      for (int64_t i = 0; i < len; ++i) buf[static_cast<size_t>(i)] = load(x, begin + i);
      p = buf.data();
    }
    const float a = block_amax(p, len);
    if (std::isnan(a)) nan = true;
    m = std::max(m, std::isnan(a) ? 0.0f : a);
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : m;
}

template <>
void quantize<Backend::cpu>(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                            QuantizedTensor& q) {
  const bool fp4 = cfg.dtype == DType::e2m1;
  const bool nvfp4_mode =
      cfg.mode == ScalingMode::block_1x16 || cfg.mode == ScalingMode::block_16x16;
  const int64_t cols = x.shape().last(), rows = x.numel() / std::max<int64_t>(cols, 1);
  WEFT_CHECK(!fp4 || ((!cfg.rowwise || cols % 2 == 0) && (!cfg.columnwise || rows % 2 == 0)),
             "quantize to fp4_e2m1 packs two elements a byte: a ({}, {}) matrix needs an even "
             "row length (and an even row count column-wise)",
             rows, cols);
  q.mode = cfg.mode;
  q.dtype = cfg.dtype;
  q.rows = rows;
  q.cols = cols;
  // The amax: a by-product of the row-wise pass, else a pass of its own.
  // NVFP4 needs it first when it derives its per-tensor scale from it.
  const bool amax_first = !cfg.rowwise || (nvfp4_mode && cfg.global_amax < 0.0f);
  q.amax = amax_first ? amax<Backend::cpu>(ec, x) : 0.0f;

  SegmentParams p{cfg.mode, cfg.dtype, cfg.scale, 1.0f, 1.0f, cfg.stochastic, cfg.seed, nullptr};
  std::array<float, 256> enc_scale{};
  q.tensor_scale_inv = 1.0f;
  if (cfg.mode == ScalingMode::tensor) q.tensor_scale_inv = 1.0f / cfg.scale;
  if (nvfp4_mode) {
    const float g = cfg.global_amax >= 0.0f ? cfg.global_amax : q.amax;
    float s = g > 0.0f && std::isfinite(g) ? 448.0f * 6.0f / g : 1.0f;
    s = std::min(s, FLT_MAX);
    p.s_enc = s;
    p.s_dec = 1.0f / s;
    q.tensor_scale_inv = p.s_dec;
    for (int c = 0; c < 256; ++c) {
      enc_scale[static_cast<size_t>(c)] = nvfp4_encode_scale(static_cast<uint8_t>(c), p);
    }
    p.enc_scale = enc_scale.data();
  }
  // 16x16: the tile scales first, shared by both copies.
  std::vector<uint8_t> tiles, tiles_t;
  if (cfg.mode == ScalingMode::block_16x16) nvfp4_tile_scales(ec, x, rows, cols, p, tiles, tiles_t);
  if (cfg.rowwise) {
    const uint32_t amax_bits = quantize_rows(ec, x, cfg, p, tiles, q);
    if (!amax_first) {
      q.amax = amax_bits > 0x7f800000u ? std::numeric_limits<float>::quiet_NaN()
                                       : std::bit_cast<float>(amax_bits);
    }
  } else {
    q.data = Tensor();
    q.scale_inv = Tensor();
  }
  if (!cfg.columnwise) {
    q.col_data = Tensor();
    q.col_scale_inv = Tensor();
    return;
  }
  quantize_columns(ec, x, cfg, p, tiles_t, q);
}

template <>
void dequantize<Backend::cpu>(const ExecContext& ec, const QuantizedTensor& q, bool columnwise,
                              Tensor& out) {
  const Tensor& data = columnwise ? q.col_data : q.data;
  const Tensor& sc = columnwise ? q.col_scale_inv : q.scale_inv;
  std::array<float, 256> table{};
  for (int v = 0; v < 256; ++v) {
    const auto b = static_cast<uint8_t>(v);
    table[static_cast<size_t>(v)] = q.dtype == DType::e4m3   ? e4m3_to_f32(b)
                                    : q.dtype == DType::e5m2 ? e5m2_to_f32(b)
                                                             : e2m1_to_f32(b);
  }
  // The decoded block scales: e8m0 (MXFP8) or e4m3 (NVFP4) codes.
  std::array<float, 256> block_scale{};
  for (int v = 0; v < 256; ++v) {
    const auto b = static_cast<uint8_t>(v);
    block_scale[static_cast<size_t>(v)] =
        q.mode == ScalingMode::block_1x32 ? e8m0_to_f32(b) : e4m3_to_f32(b);
  }
  // The stored matrix: (rows, cols) row-wise, (cols, rows) column-wise; its
  // element (i, j) goes to out (i, j), or to out (j, i) for the column-wise copy.
  const int64_t rows = columnwise ? q.cols : q.rows, cols = columnwise ? q.rows : q.cols;
  const int64_t out_row = columnwise ? 1 : cols, out_col = columnwise ? q.cols : 1;
  const auto* d = static_cast<const uint8_t*>(data.raw());
  const auto* s = static_cast<const uint8_t*>(sc.raw());
  float* o = out.data<float>();
  const int64_t bc = scaling_block_cols(q.mode), br = scaling_block_rows(q.mode);
  const int64_t scale_cols = sc.shape().last();
  const float t = q.tensor_scale_inv;
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    float* orow = o + r * out_row;
    if (q.mode == ScalingMode::tensor) {
      const uint8_t* drow = d + r * cols;
      if (columnwise) {
        for (int64_t c = 0; c < cols; ++c) orow[c * out_col] = table[drow[c]] * t;
      } else {
        dequant_tensor(drow, table.data(), t, cols, orow);
      }
      continue;
    }
    // Block by block: one decoded scale per block; whole blocks of a
    // row-wise copy by the vectorized loop.
    const uint8_t* srow = s + (r / br) * scale_cols;
    int64_t done = 0;
    if (!columnwise) {
      const int64_t blocks = cols / bc;
      const float second = q.mode == ScalingMode::block_1x32 ? 1.0f : t;
      if (q.mode == ScalingMode::block_1x32) {
        dequant_blocks<32, false>(d, r * cols, table.data(), block_scale.data(), srow, second,
                                  blocks, orow);
      } else if (q.dtype == DType::e2m1) {
        dequant_blocks<16, true>(d, r * cols, table.data(), block_scale.data(), srow, second,
                                 blocks, orow);
      } else {
        dequant_blocks<16, false>(d, r * cols, table.data(), block_scale.data(), srow, second,
                                  blocks, orow);
      }
      done = blocks * bc;
    }
    for (int64_t c0 = done; c0 < cols; c0 += bc) {
      const int64_t len = std::min(bc, cols - c0);
      // NVFP4 decodes (q · s_block) · (1/S), in that order (q · s_block is exact).
      const bool mx = q.mode == ScalingMode::block_1x32;
      const float scale = mx ? e8m0_to_f32(srow[c0 / bc]) : e4m3_to_f32(srow[c0 / bc]);
      const float second = mx ? 1.0f : t;
      const int64_t i0 = r * cols + c0;
      if (q.dtype == DType::e2m1) {
        for (int64_t c = 0; c < len; ++c) {
          const int64_t i = i0 + c;
          orow[(c0 + c) * out_col] = table[(d[i / 2] >> ((i % 2) * 4)) & 0xfu] * scale * second;
        }
      } else {
        for (int64_t c = 0; c < len; ++c) {
          orow[(c0 + c) * out_col] = table[d[i0 + c]] * scale * second;
        }
      }
    }
  }
}

template <>
void hadamard16_transpose<Backend::cpu>(const ExecContext& ec, const Tensor& x, uint16_t signs,
                                        Tensor& out) {
  WEFT_CHECK(x.dtype() == DType::f32 && out.dtype() == DType::f32,
             "hadamard16_transpose reads and writes f32");
  const int64_t cols = x.shape().last(), rows = x.numel() / std::max<int64_t>(cols, 1);
  WEFT_CHECK(rows % 16 == 0, "hadamard16_transpose needs a multiple of 16 rows, got {}", rows);
  WEFT_CHECK(out.numel() == rows * cols, "hadamard16_transpose writes ({}, {}), got {}", cols, rows,
             out.shape());
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  const int64_t groups = rows / 16;
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < cols; ++c) {
      std::array<float, 16> v{};
      for (int64_t i = 0; i < 16; ++i) v[static_cast<size_t>(i)] = src[(g * 16 + i) * cols + c];
      // v · H: the fast Walsh-Hadamard butterflies (H symmetric), then 1/4.
      for (size_t h = 1; h < 16; h <<= 1) {
        for (size_t i = 0; i < 16; i += 2 * h) {
          for (size_t j = i; j < i + h; ++j) {
            const float a = v[j], b = v[j + h];
            v[j] = a + b;
            v[j + h] = a - b;
          }
        }
      }
      for (size_t j = 0; j < 16; ++j) {
        const float s = (signs >> j) & 1u ? -0.25f : 0.25f;
        dst[c * rows + g * 16 + static_cast<int64_t>(j)] = v[j] * s;
      }
    }
  }
}

}  // namespace weft::kernels::impl
