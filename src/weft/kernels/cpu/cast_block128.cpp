// fp8-block on the CPU: E4M3/E5M2 codes with one power-of-two f32 scale per
// 1x128 block (activations, gradients) or 128x128 tile (weights).
//
// Every element is encode(x · s) with its block's encode scale s
// (fp8_block_scale): the per-tensor encoder of cast_simd.h applied to one
// block at a time, so the vector builds and the baseline code give the same
// codes. Both copies come from one pass over x, band by band of 128 rows
// (quantize_bands): 128x128 tiles first take their scale from the band's
// tile amaxes; then the band's rows, row-wise blocks being contiguous runs
// of a row; then, while the band is still in cache, its share of the
// column-wise copy (xᵀ, blocks of 128 down x's columns): the columns'
// amaxes (rows in order, columns side by side), their scales, then
// cast_simd.h's column encoder with a scale per column for whole 16 x 16
// tiles (64 rows at a time) and the baseline encoder for ragged edges.
// 128x128 tiles encode both copies with the tile's scale, so the
// column-wise codes are the row-wise ones transposed.
#include "weft/kernels/cpu/cast_block128.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <vector>

#include "weft/kernels/cpu/cast_blocks.h"
#include "weft/kernels/cpu/cast_passes.h"

namespace weft::kernels::cpu {

namespace {

using namespace cast_detail;

constexpr int64_t kB = 128;     // block length
constexpr int64_t kStrip = 16;  // columns transposed at a time

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The largest |x[i]| as bits (NaN above Inf), any n.
uint32_t abs_max_any(const cast_simd::Kernels* k, const float* x, int64_t n) {
  const int64_t n16 = k != nullptr ? n & ~int64_t{15} : 0;
  uint32_t m = n16 > 0 ? k->abs_max(x, n16) : 0;
  for (int64_t i = n16; i < n; ++i) m = std::max(m, std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu);
  return m;
}

uint8_t encode_one_of(DType t, float v) {
  return t == DType::e4m3 ? encode_one<3, 7, 0x7e, 7, 0x7f>(v)
                          : encode_one<2, 15, 0x7b, 7, 0x7f>(v);
}

float value_of(DType t, uint8_t code) {
  return t == DType::e4m3 ? e4m3_to_f32(code) : e5m2_to_f32(code);
}

// One quantize call's pointers.
struct Job {
  const Tensor& x;
  const QuantizeConfig& cfg;
  const cast_simd::Kernels* k;
  int64_t rows, cols;
  float fmax;
  uint8_t* data = nullptr;   // (rows, cols) or null
  float* scales = nullptr;   // row-wise scale_inv
  uint8_t* cdata = nullptr;  // (cols, rows) or null
  float* cscales = nullptr;  // column-wise scale_inv
  // 128x128: the tiles' encode scales, (⌈rows/128⌉, ⌈cols/128⌉).
  std::vector<float> tile_scale;
};

// Rows [r0, r0 + nr) of x as f32, one after another: x itself or converted into buf.
const float* band_of(const Job& j, int64_t r0, int64_t nr, std::vector<float>& buf) {
  if (j.x.dtype() == DType::f32) return j.x.data<float>() + r0 * j.cols;
  buf.resize(static_cast<size_t>(nr * j.cols));
  const uint16_t* src = j.x.bf16_data() + r0 * j.cols;
  for (int64_t i = 0; i < nr * j.cols; ++i) buf[static_cast<size_t>(i)] = bf16_to_f32(src[i]);
  return buf.data();
}

// A thread's scratch, for all its bands.
struct Scratch {
  std::vector<float> buf, s;
  std::vector<uint32_t> m;
};

// Band t's 128x128 tiles (its nr rows at `band`): their encode scales into
// j.tile_scale. Returns the band's amax bits.
uint32_t band_tiles(Job& j, int64_t t, const float* band, int64_t nr, Scratch& w) {
  const int64_t tc = ceil_div(j.cols, kB);
  w.m.assign(static_cast<size_t>(tc), 0);
  for (int64_t r = 0; r < nr; ++r) {
    for (int64_t b = 0; b < tc; ++b) {
      const int64_t c0 = b * kB;
      w.m[static_cast<size_t>(b)] =
          std::max(w.m[static_cast<size_t>(b)],
                   abs_max_any(j.k, band + r * j.cols + c0, std::min(kB, j.cols - c0)));
    }
  }
  uint32_t all = 0;
  for (int64_t b = 0; b < tc; ++b) {
    const uint32_t mb = w.m[static_cast<size_t>(b)];
    all = std::max(all, mb);
    j.tile_scale[static_cast<size_t>(t * tc + b)] = fp8_block_scale(amax_of_bits(mb), j.fmax);
  }
  return all;
}

// Band t's rows of the row-wise copy (past the caches where `stream`);
// returns their amax bits (1x128; 0 for 128x128 tiles, whose amax came first).
uint32_t band_rows(const Job& j, int64_t t, const float* band, int64_t nr, bool stream) {
  const int64_t nb = ceil_div(j.cols, kB), tc = nb;
  const bool tiled = j.cfg.mode == ScalingMode::block_128x128;
  const int fmt = simd_format(j.cfg.dtype);
  uint32_t all = 0;
  for (int64_t i = 0; i < nr; ++i) {
    const int64_t r = t * kB + i;
    const float* row = band + i * j.cols;
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t c0 = b * kB, n = std::min(kB, j.cols - c0);
      float s = 0.0f;
      if (tiled) {
        s = j.tile_scale[static_cast<size_t>(t * tc + b)];
      } else {
        const uint32_t m = abs_max_any(j.k, row + c0, n);
        all = std::max(all, m);
        s = fp8_block_scale(amax_of_bits(m), j.fmax);
        j.scales[r * nb + b] = 1.0f / s;
      }
      uint8_t* out = j.data + r * j.cols + c0;
      const int64_t n16 = j.k != nullptr ? n & ~int64_t{15} : 0;
      if (n16 > 0) j.k->encode_tensor(fmt, row + c0, s, n16, out, stream);
      for (int64_t e = n16; e < n; ++e) out[e] = encode_one_of(j.cfg.dtype, row[c0 + e] * s);
    }
  }
  return all;
}

// m[c] = the largest |x[r][c]| over rows r < nr (as bits), x's rows `cols` long.
WEFT_CAST_CLONES void column_amax(const float* x, int64_t nr, int64_t cols, uint32_t* m) {
  for (int64_t r = 0; r < nr; ++r) {
    const float* row = x + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      const uint32_t a = std::bit_cast<uint32_t>(row[c]) & 0x7fffffffu;
      m[c] = a > m[c] ? a : m[c];
    }
  }
}

// Band t's share of the column-wise copy (past the caches where `stream`);
// returns its amax bits (1x128; 0 for 128x128 tiles).
uint32_t band_columns(const Job& j, int64_t t, const float* band, int64_t nr, bool stream,
                      Scratch& w) {
  const int64_t bands = ceil_div(j.rows, kB), tc = ceil_div(j.cols, kB);
  const bool tiled = j.cfg.mode == ScalingMode::block_128x128;
  const int fmt = simd_format(j.cfg.dtype);
  const int64_t r0 = t * kB;
  uint32_t all = 0;
  // Each column's block: its amax (rows in order, the columns side by
  // side), then its scale.
  w.s.resize(static_cast<size_t>(j.cols));
  if (tiled) {
    for (int64_t c = 0; c < j.cols; ++c) {
      w.s[static_cast<size_t>(c)] = j.tile_scale[static_cast<size_t>(t * tc + c / kB)];
    }
  } else {
    w.m.assign(static_cast<size_t>(j.cols), 0);
    column_amax(band, nr, j.cols, w.m.data());
    for (int64_t c = 0; c < j.cols; ++c) {
      const uint32_t mc = w.m[static_cast<size_t>(c)];
      all = std::max(all, mc);
      w.s[static_cast<size_t>(c)] = fp8_block_scale(amax_of_bits(mc), j.fmax);
      j.cscales[c * bands + t] = 1.0f / w.s[static_cast<size_t>(c)];
    }
  }
  // The column encoder of cast_simd.h with a scale per column writes the
  // codes of whole 16 x 16 tiles transposed; the rest element by element.
  const int64_t vr = j.k != nullptr ? nr / 16 * 16 : 0, vc = j.k != nullptr ? j.cols / 16 * 16 : 0;
  for (int64_t h = 0; h < vr && vc > 0; h += 64) {
    const cast_simd::ColumnBand cb{.x = band + h * j.cols,
                                   .ld = j.cols,
                                   .nr = std::min<int64_t>(64, vr - h),
                                   .nc = vc,
                                   .cd = j.cdata + r0 + h,
                                   .ldc = j.rows,
                                   .cs = nullptr,
                                   .lds = 0,
                                   .stream = stream};
    j.k->scaled_cols(fmt, cb, w.s.data());
  }
  for (int64_t c = 0; c < j.cols; ++c) {
    const int64_t from = c < vc ? vr : 0;  // rows the vector tiles left
    for (int64_t r = from; r < nr; ++r) {
      j.cdata[c * j.rows + r0 + r] =
          encode_one_of(j.cfg.dtype, band[r * j.cols + c] * w.s[static_cast<size_t>(c)]);
    }
  }
  return all;
}

// Both copies in one pass over x, band by band of 128 rows: a band's tiles'
// scales (128x128), its rows, then its share of the column-wise copy while
// the band is still in cache. Returns the amax bits.
uint32_t quantize_bands(const ExecContext& ec, Job& j) {
  const int64_t bands = ceil_div(j.rows, kB);
  const bool tiled = j.cfg.mode == ScalingMode::block_128x128;
  // Copies too large to stay in the caches go past them.
  const bool stream = j.rows * j.cols >= kStreamBytes;
  uint32_t all = 0;
#pragma omp parallel num_threads(ec.threads()) reduction(max : all)
  {
    Scratch w;
#pragma omp for schedule(static) nowait
    for (int64_t t = 0; t < bands; ++t) {
      const int64_t r0 = t * kB, nr = std::min(kB, j.rows - r0);
      const float* band = band_of(j, r0, nr, w.buf);
      if (tiled) all = std::max(all, band_tiles(j, t, band, nr, w));
      if (j.data != nullptr) all = std::max(all, band_rows(j, t, band, nr, stream));
      if (j.cdata != nullptr) all = std::max(all, band_columns(j, t, band, nr, stream, w));
    }
    if (stream) stream_fence();
  }
  return all;
}

}  // namespace

void quantize_block128(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                       QuantizedTensor& q) {
  const int64_t cols = x.shape().last(), rows = x.numel() / std::max<int64_t>(cols, 1);
  Job j{.x = x,
        .cfg = cfg,
        .k = cast_kernels(),
        .rows = rows,
        .cols = cols,
        .fmax = dtype_max(cfg.dtype),
        .tile_scale = {}};
  q.mode = cfg.mode;
  q.dtype = cfg.dtype;
  q.rows = rows;
  q.cols = cols;
  q.tensor_scale_inv = 1.0f;
  const bool tiled = cfg.mode == ScalingMode::block_128x128;
  const int64_t tr = ceil_div(rows, kB), tc = ceil_div(cols, kB);
  if (tiled) j.tile_scale.assign(static_cast<size_t>(tr * tc), 1.0f);
  if (cfg.rowwise) {
    reuse(q.data, {rows, cols}, cfg.dtype);
    reuse(q.scale_inv, scale_shape(cfg.mode, rows, cols), DType::f32);
    j.data = static_cast<uint8_t*>(q.data.raw());
    j.scales = q.scale_inv.data<float>();
  } else {
    q.data = Tensor();
    q.scale_inv = Tensor();
  }
  if (cfg.columnwise) {
    reuse(q.col_data, {cols, rows}, cfg.dtype);
    reuse(q.col_scale_inv, scale_shape(cfg.mode, cols, rows), DType::f32);
    j.cdata = static_cast<uint8_t*>(q.col_data.raw());
    j.cscales = q.col_scale_inv.data<float>();
  } else {
    q.col_data = Tensor();
    q.col_scale_inv = Tensor();
  }
  const uint32_t amax_bits = quantize_bands(ec, j);
  if (tiled && cfg.rowwise) {
    std::transform(j.tile_scale.begin(), j.tile_scale.end(), j.scales,
                   [](float s) { return 1.0f / s; });
  }
  if (tiled && cfg.columnwise) {  // the tiles' scales transposed
    for (int64_t a = 0; a < tr; ++a) {
      for (int64_t b = 0; b < tc; ++b) {
        j.cscales[b * tr + a] = 1.0f / j.tile_scale[static_cast<size_t>(a * tc + b)];
      }
    }
  }
  q.amax = amax_of_bits(amax_bits);
}

void dequantize_block128(const ExecContext& ec, const QuantizedTensor& q, bool columnwise,
                         Tensor& out) {
  const Tensor& data = columnwise ? q.col_data : q.data;
  const Tensor& sc = columnwise ? q.col_scale_inv : q.scale_inv;
  // The stored matrix (sr, scols): (q.rows, q.cols), or (q.cols, q.rows)
  // column-wise; its element (i, j) goes to out (i, j), or (j, i).
  const int64_t sr = columnwise ? q.cols : q.rows, scols = columnwise ? q.rows : q.cols;
  const int64_t br = scaling_block_rows(q.mode), ns = sc.shape().last();
  WEFT_CHECK(sc.dtype() == DType::f32 && sc.numel() == ceil_div(sr, br) * ceil_div(scols, kB),
             "dequantize: a {} tensor's scales are {} {}, expected f32 ({}, {})",
             scaling_mode_name(q.mode), dtype_name(sc.dtype()), sc.shape(), ceil_div(sr, br),
             ceil_div(scols, kB));
  std::array<float, 256> table{};
  for (int v = 0; v < 256; ++v) {
    table[static_cast<size_t>(v)] = value_of(q.dtype, static_cast<uint8_t>(v));
  }
  const auto* d = static_cast<const uint8_t*>(data.raw());
  const float* s = sc.data<float>();
  float* o = out.data<float>();
  const cast_simd::Kernels* k = cast_kernels();
  const int fmt = simd_format(q.dtype);
  // Decodes n codes of stored row i from column j0 with scale t into dst.
  auto decode = [&](int64_t i, int64_t j0, int64_t n, float t, float* dst) {
    const uint8_t* src = d + i * scols + j0;
    const int64_t n16 = k != nullptr ? n & ~int64_t{15} : 0;
    if (n16 > 0) k->dequant_tensor(fmt, src, t, n16, dst);
    for (int64_t e = n16; e < n; ++e) dst[e] = table[src[e]] * t;
  };
  if (!columnwise) {
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
    for (int64_t i = 0; i < sr; ++i) {
      for (int64_t j0 = 0; j0 < scols; j0 += kB) {
        decode(i, j0, std::min(kB, scols - j0), s[(i / br) * ns + j0 / kB], o + i * scols + j0);
      }
    }
    return;
  }
  // Column-wise: strips of 16 stored rows (x's columns) decoded, then
  // written back transposed.
  const int64_t strips = ceil_div(sr, kStrip);
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
  for (int64_t st = 0; st < strips; ++st) {
    const int64_t i0 = st * kStrip, ni = std::min(kStrip, sr - i0);
    alignas(64) std::array<float, kStrip * kB> buf{};
    for (int64_t j0 = 0; j0 < scols; j0 += kB) {
      const int64_t nj = std::min(kB, scols - j0);
      for (int64_t i = 0; i < ni; ++i) {
        decode(i0 + i, j0, nj, s[((i0 + i) / br) * ns + j0 / kB], buf.data() + i * kB);
      }
      for (int64_t jj = 0; jj < nj; ++jj) {
        float* dst = o + (j0 + jj) * sr + i0;
        for (int64_t i = 0; i < ni; ++i) dst[i] = buf[static_cast<size_t>(i * kB + jj)];
      }
    }
  }
}

}  // namespace weft::kernels::cpu
