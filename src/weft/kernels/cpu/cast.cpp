#include "weft/kernels/impl/cast.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "weft/kernels/cpu/cast_block128.h"
#include "weft/kernels/cpu/cast_blocks.h"
#include "weft/kernels/cpu/cast_passes.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace weft::kernels {

namespace cpu {

using namespace cast_detail;

namespace {

// -1: vector_isa() decides; else the VectorIsa a ScopedCastIsa forced.
std::atomic<int> forced_isa{-1};

const cast_simd::Kernels* kernels_of(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::avx512: return cast_simd::avx512_kernels();
    case VectorIsa::avx2: return cast_simd::avx2_kernels();
    default: return nullptr;
  }
}

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

// The same through the vector kernel k where there is one (whole vectors).
uint32_t abs_max_bits(const cast_simd::Kernels* k, const float* x, int64_t n) {
  if (k == nullptr) return abs_max_bits(x, n);
  const int64_t n16 = n & ~int64_t{15};
  return std::max(k->abs_max(x, n16), abs_max_bits(x + n16, n - n16));
}

float float_of_bits(uint32_t m) {
  return m > 0x7f800000u ? std::numeric_limits<float>::quiet_NaN() : std::bit_cast<float>(m);
}

// The block's amax, NaN when an element is NaN.
inline float block_amax(const float* x, int64_t n) { return float_of_bits(abs_max_bits(x, n)); }

// Writes n codes at element index `at` of a data buffer (packed for e2m1,
// `at` and n even).
void store_codes(DType t, const uint8_t* codes, int64_t n, uint8_t* data, int64_t at) {
  if (t != DType::e2m1) {
    std::memcpy(data + at, codes, static_cast<size_t>(n));
    return;
  }
  pack_e2m1(codes, n, data + at / 2);
}

// quantize_segment in the baseline code: whole blocks by cast_blocks.h's
// loops, a ragged tail block element by element; one-byte codes, packed at
// the end for e2m1.
uint32_t baseline_segment(const SegmentParams& p, const float* x, int64_t n, int64_t c0,
                          uint8_t* data, int64_t at, uint8_t* scales, const uint8_t* tile_scales,
                          uint64_t stream) {
  thread_local std::vector<uint8_t> buf;
  buf.resize(static_cast<size_t>(n));
  uint8_t* codes = p.dtype == DType::e2m1 ? buf.data() : data + at;
  const uint32_t m = abs_max_bits(x, n);
  if (p.mode == ScalingMode::tensor) {
    encode_rne(p.dtype, x, p.scale, codes, n);
    return m;
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
      uint8_t sc = 0;
      if (tile_scales != nullptr) {
        sc = tile_scales[block];
      } else {
        sc = nvfp4_block_scale(block_amax(x + b0, len), p);
      }
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
  if (p.dtype == DType::e2m1) store_codes(p.dtype, codes, n, data, at);
  return m;
}

// quantize_segment through the vector kernels: whole vectors or blocks, then
// the rest by the baseline code.
uint32_t simd_segment(const cast_simd::Kernels& k, const SegmentParams& p, const float* x,
                      int64_t n, int64_t c0, uint8_t* data, int64_t at, uint8_t* scales,
                      const uint8_t* tile_scales, uint64_t stream) {
  const int64_t bc = p.mode == ScalingMode::tensor ? 16 : scaling_block_cols(p.mode);
  const int64_t full = n / bc, done = full * bc, first = c0 / bc;
  uint32_t m = 0;
  if (p.mode == ScalingMode::tensor) {
    m = k.encode_tensor(simd_format(p.dtype), x, p.scale, done, data + at, p.stream);
  } else if (p.mode == ScalingMode::block_1x32) {
    m = k.mx_blocks(simd_format(p.dtype), x, full, 1.0f / dtype_max(p.dtype), data + at,
                    scales + first, p.stream);
  } else {
    const cast_simd::RandomStream random{p.seed, stream};
    m = k.nv_blocks(x, full, p.s_enc, p.enc_scale, tile_scales ? tile_scales + first : nullptr,
                    p.stochastic ? &random : nullptr, data + at / 2,
                    scales ? scales + first : nullptr, p.stream);
  }
  if (done == n) return m;
  return std::max(m, baseline_segment(p, x + done, n - done, c0 + done, data, at + done, scales,
                                      tile_scales, stream + static_cast<uint64_t>(done)));
}

float load(const Tensor& x, int64_t i) {
  return x.dtype() == DType::f32 ? x.data<float>()[i] : bf16_to_f32(x.bf16_data()[i]);
}

// NVFP4 tiles of h rows (16x16: 16; 1x16 blocks: 1) by 16 columns: the
// largest magnitude of each tile (tr, tc) into m, as f32 bits. Returns the
// largest of them.
uint32_t nvfp4_tile_amax(const ExecContext& ec, const Tensor& x, int64_t rows, int64_t cols,
                         int64_t h, const cast_simd::Kernels* k, std::vector<uint32_t>& m) {
  const int64_t tr = (rows + h - 1) / h, tc = (cols + 15) / 16, full = cols / 16;
  m.resize(static_cast<size_t>(tr * tc));
  uint32_t largest = 0;
#pragma omp parallel for num_threads(ec.threads()) schedule(static) reduction(max : largest)
  for (int64_t bi = 0; bi < tr; ++bi) {
    std::vector<float> buf;
    uint32_t* mrow = m.data() + bi * tc;
    for (int64_t r = bi * h; r < std::min(rows, bi * h + h); ++r) {
      const float* xr = f32_row(x, r, cols, buf);
      const bool accumulate = r > bi * h;
      int64_t bj = 0;
      if (k != nullptr) {
        largest = std::max(largest, k->block_amax(xr, full, mrow, accumulate));
        bj = full;
      }
      for (; bj < tc; ++bj) {
        const int64_t c0 = bj * 16, len = std::min<int64_t>(16, cols - c0);
        const uint32_t v = abs_max_bits(xr + c0, len);
        mrow[bj] = accumulate ? std::max(mrow[bj], v) : v;
        largest = std::max(largest, mrow[bj]);
      }
    }
  }
  return largest;
}

// Their e4m3 scale codes (nvfp4_block_scale), into tiles (tr, tc) and the
// transposed grid tiles_t (tc, tr) for the column-wise copy.
void nvfp4_tile_scales(const std::vector<uint32_t>& tile_amax, int64_t tr, int64_t tc,
                       const SegmentParams& p, std::vector<uint8_t>& tiles,
                       std::vector<uint8_t>& tiles_t) {
  tiles.resize(tile_amax.size());
  const auto n = static_cast<int64_t>(tile_amax.size());
  if (p.k != nullptr) {
    p.k->nv_scale_codes(tile_amax.data(), n, p.s_enc, tiles.data());
  } else {
    nv_scale_codes(tile_amax.data(), n, p.s_enc, tiles.data());
  }
  tiles_t.resize(tiles.size());
  for (int64_t bi = 0; bi < tr; ++bi) {
    for (int64_t bj = 0; bj < tc; ++bj) {
      tiles_t[static_cast<size_t>(bj * tr + bi)] = tiles[static_cast<size_t>(bi * tc + bj)];
    }
  }
}

// What NVFP4's row-wise pass takes from a pass before it: the scale codes
// of 16x16 tiles (tr, tc), or of 1x16 blocks (rows, tc) whose amaxes came
// first; `rows` rows of x each.
struct First {
  const std::vector<uint8_t>& tiles;
  int64_t rows;
};

// The scale codes of 1x16 blocks whose amaxes (as bits) came first, all at
// once: the row-wise pass takes them as given (a pass over x's blocks that
// finds no amax and computes no scale).
void nvfp4_block_scales(const ExecContext& ec, const std::vector<uint32_t>& block_amax,
                        int64_t rows, int64_t tc, const SegmentParams& p,
                        std::vector<uint8_t>& codes) {
  codes.resize(block_amax.size());
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const uint32_t* m = block_amax.data() + r * tc;
    uint8_t* c = codes.data() + r * tc;
    if (p.k != nullptr) {
      p.k->nv_scale_codes(m, tc, p.s_enc, c);
    } else {
      nv_scale_codes(m, tc, p.s_enc, c);
    }
  }
}

// Where the row-wise copy goes: q.data, q.scale_inv, made ready.
struct RowsOut {
  uint8_t* data;
  uint8_t* sc;
  int64_t scale_cols;
};

RowsOut prepare_rows(const QuantizeConfig& cfg, const std::vector<uint8_t>& tiles,
                     QuantizedTensor& q) {
  // 16x16: the tile scales are the row-wise scales.
  reuse(q.data, {q.rows, q.cols}, cfg.dtype);
  reuse(q.scale_inv, scale_shape(cfg.mode, q.rows, q.cols), scale_dtype(cfg.mode));
  if (cfg.mode == ScalingMode::tensor) q.scale_inv.data<float>()[0] = q.tensor_scale_inv;
  auto* sc = static_cast<uint8_t*>(q.scale_inv.raw());
  if (!tiles.empty()) std::memcpy(sc, tiles.data(), tiles.size());
  return {static_cast<uint8_t*>(q.data.raw()), sc, q.scale_inv.shape().last()};
}

// Row r of the row-wise copy; returns the bits of the row's largest magnitude
// (NaN above every number).
uint32_t quantize_row(const Tensor& x, const QuantizeConfig& cfg, const SegmentParams& p,
                      const First& first, const RowsOut& o, int64_t r) {
  const int64_t cols = x.shape().last(), tc = (cols + 15) / 16;
  thread_local std::vector<float> buf;
  const float* xr = f32_row(x, r, cols, buf);
  // 16x16 scales are all written already.
  uint8_t* row_scales = cfg.mode == ScalingMode::tensor || cfg.mode == ScalingMode::block_16x16
                            ? nullptr
                            : o.sc + r * o.scale_cols;
  const uint8_t* tile_row =
      first.tiles.empty() ? nullptr : first.tiles.data() + (r / first.rows) * tc;
  const uint64_t stream = cfg.offset + static_cast<uint64_t>(cfg.stochastic ? r * cols : 0);
  return quantize_segment(p, xr, cols, 0, o.data, r * cols, row_scales, tile_row, stream);
}

// The row-wise copy; returns the bits of x's largest magnitude, a by-product.
uint32_t quantize_rows(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                       const SegmentParams& p, const First& first, QuantizedTensor& q) {
  const RowsOut o = prepare_rows(cfg, first.tiles, q);
  uint32_t amax_bits = 0;
#pragma omp parallel num_threads(ec.threads()) reduction(max : amax_bits)
  {
#pragma omp for schedule(static) nowait
    for (int64_t r = 0; r < q.rows; ++r) {
      amax_bits = std::max(amax_bits, quantize_row(x, cfg, p, first, o, r));
    }
    if (p.stream) stream_fence();
  }
  return amax_bits;
}

// Both copies in one pass over bands of x's rows: each band's rows, then
// its share of the column-wise copy while the band is still in cache.
uint32_t quantize_both(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                       const SegmentParams& p, const First& first,
                       const std::vector<uint8_t>& tiles_t, const ColumnPlan& plan,
                       QuantizedTensor& q) {
  const RowsOut o = prepare_rows(cfg, first.tiles, q);
  const ColumnsOut oc = prepare_columns(cfg, tiles_t, q);
  const int64_t bands = (q.rows + plan.band - 1) / plan.band;
  uint32_t amax_bits = 0;
#pragma omp parallel num_threads(ec.threads()) reduction(max : amax_bits)
  {
#pragma omp for schedule(static) nowait
    for (int64_t b = 0; b < bands; ++b) {
      const int64_t r0 = b * plan.band, r1 = std::min(q.rows, r0 + plan.band);
      for (int64_t r = r0; r < r1; ++r) {
        amax_bits = std::max(amax_bits, quantize_row(x, cfg, p, first, o, r));
      }
      if (r0 < plan.nr) {
        column_band(x, cfg, p, tiles_t, q, oc, plan, r0, std::min(r1, plan.nr) - r0);
      }
    }
    if (p.stream) stream_fence();
  }
  column_rest(ec, x, cfg, p, tiles_t, oc, plan);
  return amax_bits;
}

}  // namespace

const cast_simd::Kernels* cast_kernels() {
  const int forced = forced_isa.load(std::memory_order_relaxed);
  if (forced >= 0) return kernels_of(static_cast<VectorIsa>(forced));
  static const cast_simd::Kernels* const k = kernels_of(vector_isa());
  return k;
}

ScopedCastIsa::ScopedCastIsa(VectorIsa isa) : previous_(forced_isa.load()) {
  WEFT_CHECK(processor_runs(isa), "this processor does not run the {} cast kernels",
             vector_isa_name(isa));
  forced_isa.store(static_cast<int>(isa));
}

ScopedCastIsa::~ScopedCastIsa() { forced_isa.store(previous_); }

int simd_format(DType t) {
  switch (t) {
    case DType::e4m3: return cast_simd::kE4M3;
    case DType::e5m2: return cast_simd::kE5M2;
    default: return cast_simd::kE2M1;
  }
}

uint8_t nvfp4_block_scale(float block_amax, const SegmentParams& p) {
  return f32_to_e4m3(block_amax / 6.0f * p.s_enc);
}

float nvfp4_encode_scale(uint8_t block_scale, const SegmentParams& p) {
  return std::min(1.0f / (e4m3_to_f32(block_scale) * p.s_dec), FLT_MAX);
}

uint32_t quantize_segment(const SegmentParams& p, const float* x, int64_t n, int64_t c0,
                          uint8_t* data, int64_t at, uint8_t* scales, const uint8_t* tile_scales,
                          uint64_t stream) {
  if (p.k == nullptr) return baseline_segment(p, x, n, c0, data, at, scales, tile_scales, stream);
  return simd_segment(*p.k, p, x, n, c0, data, at, scales, tile_scales, stream);
}

void stream_fence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

const float* f32_row(const Tensor& x, int64_t r, int64_t cols, std::vector<float>& buf) {
  if (x.dtype() == DType::f32) return x.data<float>() + r * cols;
  buf.resize(static_cast<size_t>(cols));
  const uint16_t* src = x.bf16_data() + r * cols;
  for (int64_t c = 0; c < cols; ++c) buf[static_cast<size_t>(c)] = bf16_to_f32(src[c]);
  return buf.data();
}

void reuse(Tensor& slot, const Shape& shape, DType dtype) {
  if (!slot.defined() || !(slot.shape() == shape) || slot.dtype() != dtype || !slot.sole_owner()) {
    slot = Tensor::empty(shape, dtype);
  }
}

}  // namespace cpu

namespace impl {

using namespace cpu;
using namespace cpu::cast_detail;

template <>
float amax<Backend::cpu>(const ExecContext& ec, const Tensor& x) {
  const int64_t n = x.numel();
  constexpr int64_t kSegment = 1 << 14;
  const int64_t chunks = (n + kSegment - 1) / kSegment;
  const cast_simd::Kernels* k = cast_kernels();
  uint32_t m = 0;
#pragma omp parallel for num_threads(ec.threads()) schedule(static) reduction(max : m)
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
    m = std::max(m, abs_max_bits(k, p, len));
  }
  return float_of_bits(m);
}

template <>
void quantize<Backend::cpu>(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                            QuantizedTensor& q) {
  if (is_block128(cfg.mode)) {
    quantize_block128(ec, x, cfg, q);
    return;
  }
  const bool fp4 = cfg.dtype == DType::e2m1;
  const bool nvfp4_mode =
      cfg.mode == ScalingMode::block_1x16 || cfg.mode == ScalingMode::block_16x16;
  const int64_t cols = x.shape().last(), rows = x.numel() / std::max<int64_t>(cols, 1);
  q.mode = cfg.mode;
  q.dtype = cfg.dtype;
  q.rows = rows;
  q.cols = cols;
  // The amax: a by-product of the row-wise pass, else a pass of its own.
  // NVFP4 needs it first when it derives its per-tensor scale from it. 16x16
  // tiles have it from their own amaxes, which come first; so do 1x16 blocks
  // that need it first for a row-wise copy: that pass keeps their amaxes,
  // their scale codes follow all at once, and the row-wise pass takes them
  // as given instead of finding the amaxes again. (The grid is kept from
  // call to call, as large as the last one: a fresh one would cost its page
  // faults every call.)
  const bool amax_first = !cfg.rowwise || (nvfp4_mode && cfg.global_amax < 0.0f);
  const bool tiled = cfg.mode == ScalingMode::block_16x16;
  const bool blocks_first = cfg.mode == ScalingMode::block_1x16 && cfg.rowwise && amax_first;
  thread_local std::vector<uint32_t> tile_amax;
  if (tiled || blocks_first) {
    q.amax = float_of_bits(
        nvfp4_tile_amax(ec, x, rows, cols, tiled ? 16 : 1, cast_kernels(), tile_amax));
  } else {
    q.amax = amax_first ? amax<Backend::cpu>(ec, x) : 0.0f;
  }

  SegmentParams p{cfg.mode,       cfg.dtype, cfg.scale, 1.0f,          1.0f,
                  cfg.stochastic, cfg.seed,  nullptr,   cast_kernels()};
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
  if (tiled) nvfp4_tile_scales(tile_amax, (rows + 15) / 16, (cols + 15) / 16, p, tiles, tiles_t);
  if (blocks_first) nvfp4_block_scales(ec, tile_amax, rows, (cols + 15) / 16, p, tiles);
  const First first{tiles, tiled ? 16 : 1};
  const ColumnPlan plan = cfg.columnwise ? plan_columns(x, cfg, p) : ColumnPlan{};
  // A large row-wise copy goes past the caches, unless the column-wise copy
  // is made from its codes (per-tensor scaling; MXFP8, where it can).
  const bool rows_reread =
      plan.band > 0 && (plan.from_codes || cfg.mode == ScalingMode::block_1x32);
  p.stream = (fp4 ? rows * cols / 2 : rows * cols) >= kStreamBytes && !rows_reread;
  if (cfg.rowwise) {
    const uint32_t amax_bits = plan.band > 0 ? quantize_both(ec, x, cfg, p, first, tiles_t, plan, q)
                                             : quantize_rows(ec, x, cfg, p, first, q);
    if (!amax_first && !tiled) q.amax = float_of_bits(amax_bits);
  } else {
    q.data = Tensor();
    q.scale_inv = Tensor();
  }
  if (!cfg.columnwise) {
    q.col_data = Tensor();
    q.col_scale_inv = Tensor();
  } else if (!cfg.rowwise || plan.band == 0) {
    quantize_columns(ec, x, cfg, p, tiles_t, q);
  }
}

template <>
void hadamard16_transpose<Backend::cpu>(const ExecContext& ec, const Tensor& x, uint16_t signs,
                                        Tensor& out) {
  // Checked by kernels::hadamard16_transpose: f32 in and out, rows % 16 == 0.
  const int64_t cols = x.shape().last(), rows = x.numel() / std::max<int64_t>(cols, 1);
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

}  // namespace impl
}  // namespace weft::kernels
