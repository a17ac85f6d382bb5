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
// amaxes (rows in order, columns side by side; taken with the rows when both
// copies are made), their scales, then cast_simd.h's column encoder with a
// scale per column for whole 16 x 16 tiles (64 rows at a time) and the
// baseline encoder for ragged edges. With both copies, that encoder moves
// most column-wise codes from the row-wise ones, kept in cache for it: the
// scales are powers of two, so a normal code under one is a normal code
// under the other moved by whole binades (128x128 tiles encode both copies
// with the tile's scale: the column-wise codes are the row-wise ones
// transposed). Blocks of finite amax are encoded without the clamp their
// scale makes needless (cast_simd.h encode_bounded).
#include "weft/kernels/cpu/cast_block128.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <vector>

#include "weft/kernels/cpu/cast_blocks.h"
#include "weft/kernels/cpu/cast_passes.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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
  // 128x128: the tiles' encode scales and their exponent bytes (scale_exp),
  // (⌈rows/128⌉, ⌈cols/128⌉).
  std::vector<float> tile_scale;
  std::vector<uint8_t> tile_exp;
};

// fp8_block_scale(amax_of_bits(m), fmax), branch-free so that its loops
// vectorize: 1 for an amax of 0, Inf or NaN; else fmax / amax (FLT_MAX where
// that overflows) with its mantissa cleared.
inline float block_scale(uint32_t m, float fmax) {
  const bool ordinary = m != 0 && m < 0x7f800000u;
  const float q = fmax / std::bit_cast<float>(ordinary ? m : 0x3f800000u);
  uint32_t bits = std::bit_cast<uint32_t>(q);
  bits = bits >= 0x7f800000u ? 0x7f7fffffu : bits;  // q > 0: Inf -> FLT_MAX
  return std::bit_cast<float>(ordinary ? bits & 0xff800000u : 0x3f800000u);
}

// The exponent byte of a block's scale s = block_scale(m) for the column
// encoder's codes moved from the row-wise ones (cast_simd.h scaled_cols):
// e with s = 2^(127 - e), or 0xff for an amax of 0, Inf or NaN (scale 1,
// which bounds no magnitude).
inline uint8_t scale_exp(uint32_t m, float s) {
  const bool ordinary = m != 0 && m < 0x7f800000u;
  return static_cast<uint8_t>(ordinary ? 254u - (std::bit_cast<uint32_t>(s) >> 23) : 0xffu);
}

// s[i] = block_scale(m[i]) and e[i] = scale_exp(m[i], s[i]) for i < n.
WEFT_CAST_CLONES void block_scales(const uint32_t* m, int64_t n, float fmax, float* s, uint8_t* e) {
  for (int64_t i = 0; i < n; ++i) {
    s[i] = block_scale(m[i], fmax);
    e[i] = scale_exp(m[i], s[i]);
  }
}

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
  std::vector<uint32_t> m;      // the amaxes of the band's tiles or columns
  std::vector<uint8_t> re, ce;  // the exponent bytes of its rows' and columns' scales
  std::vector<uint32_t> bm;     // a row's block amaxes
  std::vector<float> bs;        // and scales
  std::vector<uint8_t> rc;      // the band's row-wise codes, kept for the column-wise copy
};

// Band t's 128x128 tiles (its nr rows at `band`): their encode scales into
// j.tile_scale and j.tile_exp. Returns the band's amax bits.
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
  block_scales(w.m.data(), tc, j.fmax, j.tile_scale.data() + t * tc, j.tile_exp.data() + t * tc);
  return *std::max_element(w.m.begin(), w.m.end());
}

// m[c] = the largest of m[c] and |x[r][c]| over rows r < nr (as bits), x's
// rows `cols` long.
WEFT_CAST_CLONES void column_amax(const float* x, int64_t nr, int64_t cols, uint32_t* m) {
  for (int64_t r = 0; r < nr; ++r) {
    const float* row = x + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      const uint32_t a = std::bit_cast<uint32_t>(row[c]) & 0x7fffffffu;
      m[c] = a > m[c] ? a : m[c];
    }
  }
}

// dst[0, n) = src[0, n), past the caches where `stream`.
void copy_codes(uint8_t* dst, const uint8_t* src, int64_t n, bool stream) {
#if defined(__x86_64__)
  if (stream) {
    int64_t i = 0;
    for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) & 15) != 0; ++i) dst[i] = src[i];
    for (; i + 16 <= n; i += 16) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    }
    for (; i < n; ++i) dst[i] = src[i];
    return;
  }
#endif
  std::memcpy(dst, src, static_cast<size_t>(n));
}

// Band t's rows of the row-wise copy (past the caches where `stream`), each
// while it is in cache: its blocks' amaxes, then their scales (and their
// exponent bytes, into w.re), then their codes; where `keep`, the codes go to
// w.rc first, the band's rows kept in cache for the column-wise copy, and
// where `col_amax` (1x128 with the vector kernels) the band's column amaxes
// go to w.m. Returns the rows' amax bits (1x128; 0 for 128x128 tiles, whose
// amax came first).
uint32_t band_rows(const Job& j, int64_t t, const float* band, int64_t nr, bool stream, bool keep,
                   bool col_amax, Scratch& w) {
  const int64_t nb = ceil_div(j.cols, kB), tc = nb;
  const bool tiled = j.cfg.mode == ScalingMode::block_128x128;
  const int fmt = simd_format(j.cfg.dtype);
  w.re.resize(static_cast<size_t>(nr * nb));
  w.bm.resize(static_cast<size_t>(nb));
  w.bs.resize(static_cast<size_t>(nb));
  if (keep) w.rc.resize(static_cast<size_t>(nr * j.cols));
  if (col_amax) w.m.assign(static_cast<size_t>(j.cols), 0);
  uint32_t all = 0;
  for (int64_t i = 0; i < nr; ++i) {
    const int64_t r = t * kB + i;
    const float* row = band + i * j.cols;
    uint8_t* e = w.re.data() + i * nb;
    if (tiled) {
      std::copy_n(j.tile_scale.data() + t * tc, nb, w.bs.data());
      std::copy_n(j.tile_exp.data() + t * tc, nb, e);
    } else {
      // With the column amaxes, whole blocks by one vector call that takes
      // both; the rest block by block.
      int64_t whole = 0;
      if (col_amax) {
        whole = j.cols / kB;
        j.k->block_col_amax(row, whole, kB, w.bm.data(), w.m.data());
      }
      for (int64_t b = whole; b < nb; ++b) {
        const int64_t c0 = b * kB, n = std::min(kB, j.cols - c0);
        w.bm[static_cast<size_t>(b)] = abs_max_any(j.k, row + c0, n);
        if (col_amax) column_amax(row + c0, 1, n, w.m.data() + c0);
      }
      for (int64_t b = 0; b < nb; ++b) all = std::max(all, w.bm[static_cast<size_t>(b)]);
      block_scales(w.bm.data(), nb, j.fmax, w.bs.data(), e);
      for (int64_t b = 0; b < nb; ++b) j.scales[r * nb + b] = 1.0f / w.bs[static_cast<size_t>(b)];
    }
    uint8_t* codes = keep ? w.rc.data() + i * j.cols : j.data + r * j.cols;
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t c0 = b * kB, n = std::min(kB, j.cols - c0);
      const float s = w.bs[static_cast<size_t>(b)];
      const int64_t n16 = j.k != nullptr ? n & ~int64_t{15} : 0;
      // A block of finite amax (scale exponent other than 0xff) holds no
      // magnitude the encoder's clamp would change.
      if (n16 > 0 && e[b] != 0xff) {
        j.k->encode_bounded(fmt, row + c0, s, n16, codes + c0, stream && !keep);
      } else if (n16 > 0) {
        j.k->encode_tensor(fmt, row + c0, s, n16, codes + c0, stream && !keep);
      }
      for (int64_t c = n16; c < n; ++c) {
        codes[c0 + c] = encode_one_of(j.cfg.dtype, row[c0 + c] * s);
      }
    }
    if (keep) copy_codes(j.data + r * j.cols, codes, j.cols, stream);
  }
  return all;
}

// Band t's share of the column-wise copy (past the caches where `stream`);
// w.m holds the band's column amaxes already where `amax_done` (1x128).
// With `from_rows`, the band's rows of the row-wise copy are made and
// w.re holds their scales' exponent bytes. Returns the columns' amax bits
// (1x128; 0 for 128x128 tiles).
uint32_t band_columns(const Job& j, int64_t t, const float* band, int64_t nr, bool stream,
                      bool amax_done, bool from_rows, Scratch& w) {
  const int64_t bands = ceil_div(j.rows, kB), tc = ceil_div(j.cols, kB);
  const bool tiled = j.cfg.mode == ScalingMode::block_128x128;
  const int fmt = simd_format(j.cfg.dtype);
  const int64_t r0 = t * kB;
  uint32_t all = 0;
  // Each column's block: its amax (rows in order, the columns side by
  // side), then its scale.
  w.s.resize(static_cast<size_t>(j.cols));
  w.ce.resize(static_cast<size_t>(j.cols));
  if (tiled) {
    for (int64_t c = 0; c < j.cols; ++c) {
      w.s[static_cast<size_t>(c)] = j.tile_scale[static_cast<size_t>(t * tc + c / kB)];
      w.ce[static_cast<size_t>(c)] = j.tile_exp[static_cast<size_t>(t * tc + c / kB)];
    }
  } else {
    if (!amax_done) {
      w.m.assign(static_cast<size_t>(j.cols), 0);
      column_amax(band, nr, j.cols, w.m.data());
    }
    block_scales(w.m.data(), j.cols, j.fmax, w.s.data(), w.ce.data());
    for (int64_t c = 0; c < j.cols; ++c) {
      all = std::max(all, w.m[static_cast<size_t>(c)]);
      j.cscales[c * bands + t] = 1.0f / w.s[static_cast<size_t>(c)];
    }
  }
  // The column encoder of cast_simd.h with a scale per column writes the
  // codes of whole 16 x 16 tiles transposed; the rest element by element.
  const int64_t vr = j.k != nullptr ? nr / 16 * 16 : 0, vc = j.k != nullptr ? j.cols / 16 * 16 : 0;
  const int64_t nb = ceil_div(j.cols, kB);
  for (int64_t h = 0; h < vr && vc > 0; h += 64) {
    cast_simd::ColumnBand cb{.x = band + h * j.cols,
                             .ld = j.cols,
                             .nr = std::min<int64_t>(64, vr - h),
                             .nc = vc,
                             .cd = j.cdata + r0 + h,
                             .ldc = j.rows,
                             .cs = nullptr,
                             .lds = 0,
                             .stream = stream};
    if (from_rows) {
      cb.rc = w.rc.data() + h * j.cols;
      cb.ldr = j.cols;
      cb.rs = w.re.data() + h * nb;
      cb.ldrs = nb;
    }
    j.k->scaled_cols(fmt, cb, w.s.data(), from_rows ? w.ce.data() : nullptr);
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
  // Copies too large to stay in the caches go past them (the row-wise one
  // copied from w.rc where the column-wise codes are moved from it).
  const bool stream = j.rows * j.cols >= kStreamBytes;
  const bool both = j.data != nullptr && j.cdata != nullptr && j.k != nullptr;
  uint32_t all = 0;
#pragma omp parallel num_threads(ec.threads()) reduction(max : all)
  {
    Scratch w;
#pragma omp for schedule(static) nowait
    for (int64_t t = 0; t < bands; ++t) {
      const int64_t r0 = t * kB, nr = std::min(kB, j.rows - r0);
      const float* band = band_of(j, r0, nr, w.buf);
      if (tiled) all = std::max(all, band_tiles(j, t, band, nr, w));
      const bool col_amax = both && !tiled;  // both: the vector kernels
      if (j.data != nullptr) {
        all = std::max(all, band_rows(j, t, band, nr, stream, both, col_amax, w));
      }
      if (j.cdata != nullptr) {
        all = std::max(all, band_columns(j, t, band, nr, stream, col_amax, both, w));
      }
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
        .tile_scale = {},
        .tile_exp = {}};
  q.mode = cfg.mode;
  q.dtype = cfg.dtype;
  q.rows = rows;
  q.cols = cols;
  q.tensor_scale_inv = 1.0f;
  const bool tiled = cfg.mode == ScalingMode::block_128x128;
  const int64_t tr = ceil_div(rows, kB), tc = ceil_div(cols, kB);
  if (tiled) {
    j.tile_scale.assign(static_cast<size_t>(tr * tc), 1.0f);
    j.tile_exp.assign(static_cast<size_t>(tr * tc), 0xff);
  }
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
  // kernels::dequantize checked the data and scales against q (the dispatch rule).
  const int64_t br = scaling_block_rows(q.mode), ns = sc.shape().last();
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
