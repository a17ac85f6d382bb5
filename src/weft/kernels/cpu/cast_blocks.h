// The element and block encoders of the CPU cast kernels (kernels/cpu/cast*.cpp):
// branch-free, so that their loops vectorize, and multiversioned (AVX-512,
// AVX2, baseline) where the loops are. The baseline code: what runs where the
// hand-vectorized kernels of cast_simd.h do not, and their reference.
// Internal to the cast files.
#pragma once

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "weft/core/dtype.h"
#include "weft/core/error.h"

// Clang does not multiversion function templates: one baseline version there.
#if defined(__x86_64__) && !defined(WEFT_NO_MULTIVERSIONING) && !defined(__clang__)
#define WEFT_CAST_CLONES [[gnu::target_clones("avx512f", "avx2", "default")]]
#else
#define WEFT_CAST_CLONES
#endif

namespace weft::kernels::cpu::cast_detail {

// ---- element encoding ------------------------------------------------------
//
// A branch-free round-to-nearest-even encoder over f32 bits, so the loops
// vectorize: normal results round the f32 significand to the format's
// mantissa bits with integer arithmetic (a carry moves into the exponent by
// itself); results below the format's smallest normal are rounded by the FPU,
// adding a power of two whose spacing is the format's subnormal spacing.
// Codes beyond the largest finite one (Inf included) saturate; NaN maps to
// the format's NaN (e2m1 has none: +max). Bit for bit as dtype.h's converters
// (the tests compare them exhaustively over e4m3/e5m2/e2m1 boundaries).
struct Format {
  int man;            // mantissa bits
  int bias;           // exponent bias
  uint32_t max_code;  // largest finite magnitude code
  int sign_shift;     // 7 for fp8, 3 for fp4
  uint32_t nan;       // the code NaN becomes (sign added for fp8)
};

constexpr Format kE4M3{3, 7, 0x7e, 7, 0x7f};
constexpr Format kE5M2{2, 15, 0x7b, 7, 0x7f};
constexpr Format kE2M1{1, 1, 0x7, 3, 0x7};

inline const Format& format_of(DType t) {
  switch (t) {
    case DType::e4m3: return kE4M3;
    case DType::e5m2: return kE5M2;
    case DType::e2m1: return kE2M1;
    default: WEFT_FAIL("quantize: {} is not an fp8 or fp4 element type", dtype_name(t));
  }
}

template <int Man, int Bias, uint32_t MaxCode, int SignShift, uint32_t NanCode>
inline uint8_t encode_one(float v) {
  constexpr int kEmin = 1 - Bias;  // exponent of the smallest normal
  constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(kEmin + 127) << 23;
  // 2^(kEmin - Man + 23): adding it leaves the format's subnormal spacing as
  // the f32 spacing, so the FPU rounds to the nearest subnormal (even ties).
  constexpr uint32_t kMagicBits = static_cast<uint32_t>(kEmin - Man + 23 + 127) << 23;
  const float magic = std::bit_cast<float>(kMagicBits);
  const uint32_t u = std::bit_cast<uint32_t>(v);
  const uint32_t a = u & 0x7fffffffu;
  // Masks instead of branches, so that the loop vectorizes.
  const uint32_t is_nan = 0u - static_cast<uint32_t>(a > 0x7f800000u);
  const uint32_t is_sub = 0u - static_cast<uint32_t>(a < kMinNormalBits);
  const uint32_t sat = a < 0x7f800000u ? a : 0x7f800000u;
  const uint32_t r = sat + ((1u << (22 - Man)) - 1) + ((sat >> (23 - Man)) & 1u);
  uint32_t normal = (r >> (23 - Man)) - (static_cast<uint32_t>(127 - Bias) << Man);
  normal = normal < MaxCode ? normal : MaxCode;
  const uint32_t sub = std::bit_cast<uint32_t>(std::bit_cast<float>(a) + magic) - kMagicBits;
  uint32_t code = (sub & is_sub) | (normal & ~is_sub);
  uint32_t sign = (u >> 31) << SignShift;
  // fp8 NaN keeps its sign; e2m1 has no NaN and takes +max.
  if constexpr (SignShift == 3) sign &= ~is_nan;
  code = (NanCode & is_nan) | (code & ~is_nan);
  return static_cast<uint8_t>(code | sign);
}

// e2m1 with stochastic rounding: |v| between neighbours lo < hi rounds up
// with probability (|v| - lo) / (hi - lo); beyond 6 saturates; NaN -> +6.
// The grid's spacing is 0.5 below 2, 1 below 4 and 2 up to 6.
// Selects instead of branches, so that the loops vectorize.
// The magnitude's decisions compare its bits (ordered as the values, NaN
// above Inf): float comparisons would keep the loop from vectorizing.
inline uint8_t e2m1_stochastic(float v, float u) {
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  const uint32_t a = bits & 0x7fffffffu;
  constexpr uint32_t k2 = 0x40000000u, k4 = 0x40800000u, k6 = 0x40c00000u;
  const uint32_t small = 0u - static_cast<uint32_t>(a < k6);  // a >= 6 and NaN decided below
  const float r = std::bit_cast<float>(a & small);
  // The grid's spacing at r: 0.5 below 2, 1 below 4, 2 above.
  const float step = std::bit_cast<float>(0x3f000000u + (static_cast<uint32_t>(a >= k2) << 23) +
                                          (static_cast<uint32_t>(a >= k4) << 23));
  // floor(r / step) · step, exact (a power-of-two step); r / step < 12.
  const float below = static_cast<float>(static_cast<int32_t>(r / step)) * step;
  const float above = below + step;
  // Up when (r - below) > u · (above - below), read off the sign of the
  // difference of two finite values (zero only when they are equal).
  const float diff = (r - below) - u * (above - below);
  const uint32_t up = 0u - static_cast<uint32_t>(std::bit_cast<int32_t>(diff) > 0);
  const float pick = std::bit_cast<float>((std::bit_cast<uint32_t>(above) & up) |
                                          (std::bit_cast<uint32_t>(below) & ~up));
  // pick >= 0: its code has no sign bit.
  uint32_t code = encode_one<1, 1, 0x7, 3, 0x7>(pick);
  code = (code & small) | (0x7u & ~small) | ((bits >> 31) << 3);
  const uint32_t nan = 0u - static_cast<uint32_t>(a > 0x7f800000u);
  return static_cast<uint8_t>((code & ~nan) | (0x7u & nan));  // NaN -> +6
}

// MXFP8's shared exponent: the biased exponent of v = amax / fp8_max, rounded
// up when v is not a power of two; satfinite at 0xfe; 0 for v = 0 and for
// subnormals up to 2^-127; NaN -> 0xff, Inf -> 0xfe (TE's float_to_e8m0).
inline uint8_t e8m0_round_up(float v) {
  if (std::isnan(v)) return 0xff;
  if (std::isinf(v)) return 0xfe;
  if (v == 0.0f) return 0;
  uint32_t u;
  std::memcpy(&u, &v, 4);
  auto e = static_cast<uint8_t>(u >> 23);
  const uint32_t mantissa = u & 0x7fffffu;
  if (mantissa > 0 && e != 0xfe && !(e == 0 && mantissa <= 0x400000u)) ++e;
  return e;
}

// The multiplier of an MXFP8 block: 2^(127 - e), and 1 for e = 0 (TE's exp2f_rcp).
inline float e8m0_encode_scale(uint8_t e) {
  if (e == 0) return 1.0f;
  const uint32_t bits = static_cast<uint32_t>(254 - e) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// ---- whole blocks ------------------------------------------------------------
//
// One call quantizes `blocks` consecutive full blocks of a row segment: the
// block amax, the block scale and the codes (one byte each), with a loop of
// fixed length per block so that both vectorize. Bit for bit as the scalar
// per-block code in cast.cpp (which still takes ragged tails).

// Blocks are taken kChunk at a time: their amaxes (a fixed-length loop
// each), then their scales (one loop over the blocks, branch-free), then
// their codes.
constexpr int64_t kChunk = 64;

// The block's largest |x| as bits (NaN above Inf), for N elements.
template <int N>
inline uint32_t max_abs_bits(const float* x) {
  uint32_t m = 0;
  for (int i = 0; i < N; ++i) {
    const uint32_t a = std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu;
    m = a > m ? a : m;
  }
  return m;
}

// The f32 amax of max_abs_bits m: NaN (the quiet NaN) when m is a NaN.
inline float amax_of_bits(uint32_t m) {
  return std::bit_cast<float>(m > 0x7f800000u ? 0x7fc00000u : m);
}

// e8m0_round_up(amax_of_bits(m) · inv_max) and e8m0_encode_scale of it,
// branch-free (inv_max finite and positive).
inline uint8_t e8m0_round_up_bits(uint32_t m, float inv_max) {
  const uint32_t u = std::bit_cast<uint32_t>(amax_of_bits(m) * inv_max);
  const uint32_t e = u >> 23, mantissa = u & 0x7fffffu;
  const uint32_t inc =
      static_cast<uint32_t>(mantissa > 0) & static_cast<uint32_t>(e != 0xfe) &
      ~(static_cast<uint32_t>(e == 0) & static_cast<uint32_t>(mantissa <= 0x400000u));
  uint32_t r = e + inc;
  r = u == 0x7f800000u ? 0xfeu : r;  // Inf
  r = m > 0x7f800000u ? 0xffu : r;   // NaN
  return static_cast<uint8_t>(r);
}

inline float e8m0_encode_scale_bits(uint32_t e) {
  return std::bit_cast<float>(e == 0 ? 0x3f800000u : (254u - e) << 23);
}

// MXFP8, blocks of 32: e8m0 scales into scales[0, blocks).
template <int Man, int Bias, uint32_t MaxCode, int SignShift, uint32_t NanCode>
WEFT_CAST_CLONES void mx_blocks(const float* x, int64_t blocks, float inv_max, uint8_t* codes,
                                uint8_t* scales) {
  for (int64_t b0 = 0; b0 < blocks; b0 += kChunk) {
    const int64_t nb = std::min(kChunk, blocks - b0);
    uint32_t m[kChunk];
    float s[kChunk];
    for (int64_t b = 0; b < nb; ++b) m[b] = max_abs_bits<32>(x + (b0 + b) * 32);
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t e = e8m0_round_up_bits(m[b], inv_max);
      scales[b0 + b] = e;
      s[b] = e8m0_encode_scale_bits(e);
    }
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = x + (b0 + b) * 32;
      uint8_t* cb = codes + (b0 + b) * 32;
      for (int i = 0; i < 32; ++i) {
        cb[i] = encode_one<Man, Bias, MaxCode, SignShift, NanCode>(xb[i] * s[b]);
      }
    }
  }
}

// NVFP4, blocks of 16. The block scale code: tile_scales[b] when given (16x16),
// else e4m3(amax_block / 6 · s_enc), written to scales[b] when scales is not
// null. enc_scale[code] is the encode multiplier of a scale code. u: the
// uniforms of stochastic rounding (one per element), or null for RNE.
WEFT_CAST_CLONES inline void nv_blocks(const float* x, int64_t blocks, float s_enc,
                                       const float* enc_scale, const uint8_t* tile_scales,
                                       const float* u, uint8_t* codes, uint8_t* scales) {
  for (int64_t b0 = 0; b0 < blocks; b0 += kChunk) {
    const int64_t nb = std::min(kChunk, blocks - b0);
    uint8_t sc[kChunk];
    if (tile_scales != nullptr) {
      for (int64_t b = 0; b < nb; ++b) sc[b] = tile_scales[b0 + b];
    } else {
      uint32_t m[kChunk];
      for (int64_t b = 0; b < nb; ++b) m[b] = max_abs_bits<16>(x + (b0 + b) * 16);
      for (int64_t b = 0; b < nb; ++b) {
        sc[b] = encode_one<3, 7, 0x7e, 7, 0x7f>(amax_of_bits(m[b]) / 6.0f * s_enc);  // f32_to_e4m3
      }
    }
    if (scales != nullptr) {
      for (int64_t b = 0; b < nb; ++b) scales[b0 + b] = sc[b];
    }
    for (int64_t b = 0; b < nb; ++b) {
      const float s = enc_scale[sc[b]];
      const float* xb = x + (b0 + b) * 16;
      uint8_t* cb = codes + (b0 + b) * 16;
      if (u != nullptr) {
        const float* ub = u + (b0 + b) * 16;
        for (int i = 0; i < 16; ++i) cb[i] = e2m1_stochastic(xb[i] * s, ub[i]);
      } else {
        for (int i = 0; i < 16; ++i) cb[i] = encode_one<1, 1, 0x7, 3, 0x7>(xb[i] * s);
      }
    }
  }
}

// NVFP4's scale codes of blocks (or tiles) whose largest magnitudes are
// m[i] (max_abs_bits): e4m3(amax / 6 · s_enc), as nv_blocks computes them.
WEFT_CAST_CLONES inline void nv_scale_codes(const uint32_t* m, int64_t n, float s_enc,
                                            uint8_t* codes) {
  for (int64_t i = 0; i < n; ++i) {
    codes[i] = encode_one<3, 7, 0x7e, 7, 0x7f>(amax_of_bits(m[i]) / 6.0f * s_enc);
  }
}

// out[k] = codes[2k] | codes[2k + 1] << 4 for k < n / 2: e2m1 codes packed.
WEFT_CAST_CLONES inline void pack_e2m1(const uint8_t* codes, int64_t n, uint8_t* out) {
  for (int64_t k = 0; k < n / 2; ++k) {
    out[k] = static_cast<uint8_t>((codes[2 * k] & 0xfu) | (codes[2 * k + 1] << 4));
  }
}

// Decodes `blocks` full blocks of BC elements of a row: out[i] =
// table[code_i] · block_scale[srow[block]] · second (a NaN scale: itself), codes one a byte, or
// two a byte (e2m1, low nibble first) from element index i0 (even) of d.
template <int BC, bool Fp4>
WEFT_CAST_CLONES void dequant_blocks(const uint8_t* d, int64_t i0, const float* table,
                                     const float* block_scale, const uint8_t* srow, float second,
                                     int64_t blocks, float* out) {
  for (int64_t b = 0; b < blocks; ++b) {
    const float scale = block_scale[srow[b]];
    float* ob = out + b * BC;
    if (std::isnan(scale)) {  // see dequantize_nan_block in cast_dequant.cpp
      for (int c = 0; c < BC; ++c) ob[c] = scale;
      continue;
    }
    if constexpr (Fp4) {
      const uint8_t* db = d + (i0 + b * BC) / 2;
      for (int k = 0; k < BC / 2; ++k) {
        ob[2 * k] = table[db[k] & 0xfu] * scale * second;
        ob[2 * k + 1] = table[db[k] >> 4] * scale * second;
      }
    } else {
      const uint8_t* db = d + i0 + b * BC;
      for (int c = 0; c < BC; ++c) ob[c] = table[db[c]] * scale * second;
    }
  }
}

// out[i] = table[d[i]] · t for i < n: per-tensor decoding.
WEFT_CAST_CLONES inline void dequant_tensor(const uint8_t* d, const float* table, float t,
                                            int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = table[d[i]] * t;
}

// u[i] = uniform_at(seed, stream, i) for i < n (kernels/random.h): the
// Philox blocks of the run computed side by side, `words` scratch of at least
// n + 8 entries.
WEFT_CAST_CLONES inline void uniforms(uint64_t seed, uint64_t stream, int64_t n, uint32_t* words,
                                      float* u) {
  const uint64_t first = stream / 4;
  const int64_t skip = static_cast<int64_t>(stream % 4);
  const int64_t blocks = (skip + n + 3) / 4;
  const auto k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int64_t k = 0; k < blocks; ++k) {
    const uint64_t blk = first + static_cast<uint64_t>(k);
    uint32_t c0 = static_cast<uint32_t>(blk), c1 = static_cast<uint32_t>(blk >> 32), c2 = 0, c3 = 0;
    uint32_t key0 = k0, key1 = k1;
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        key0 += 0x9E3779B9u;
        key1 += 0xBB67AE85u;
      }
      const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
      const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ key0;
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ key1;
      c1 = static_cast<uint32_t>(p1);
      c3 = static_cast<uint32_t>(p0);
      c0 = n0;
      c2 = n2;
    }
    words[4 * k] = c0;
    words[4 * k + 1] = c1;
    words[4 * k + 2] = c2;
    words[4 * k + 3] = c3;
  }
  for (int64_t i = 0; i < n; ++i) u[i] = static_cast<float>(words[skip + i] >> 8) * 0x1p-24f;
}

}  // namespace weft::kernels::cpu::cast_detail
