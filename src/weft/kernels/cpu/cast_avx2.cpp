// The cast kernels of cast_simd.h for AVX2: this file alone gets the -m flags
// (see CMakeLists.txt). Only <immintrin.h>, <stdint.h> and cast_simd.inc, in
// an unnamed namespace: nothing another file could pick up compiled for a
// processor it may not run on.
#include "weft/kernels/cpu/cast_simd.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <stdint.h>

#define WEFT_SIMD_INLINE [[gnu::always_inline]] inline

namespace weft::kernels::cpu::cast_simd {
namespace {

constexpr const char* kIsaName = "avx2";

struct F2 {
  __m256 lo, hi;
};
struct U2 {
  __m256i lo, hi;
};

// 16 lanes: two registers, lanes 0-7 in lo.
struct V {
  using F = F2;
  using U = U2;
  using M = U2;  // all ones in a lane where true
  WEFT_SIMD_INLINE static U u(uint32_t v) {
    const __m256i x = _mm256_set1_epi32(static_cast<int>(v));
    return {x, x};
  }
  // x made opaque: the compiler keeps it where it is instead of rebuilding it.
  WEFT_SIMD_INLINE static void hold(U& x) { asm("" : "+x"(x.lo), "+x"(x.hi)); }
  WEFT_SIMD_INLINE static F f(float v) {
    const __m256 x = _mm256_set1_ps(v);
    return {x, x};
  }
  // 16 registers (each vector takes two): the kernels keep at most 4 vectors
  // of accumulators in them.
  static constexpr int kAccumulators = 4;
  // Philox groups computed side by side (kernels/cpu/cast_simd.inc): one
  // fills the registers.
  static constexpr int kPhiloxGroups = 1;
  // No table of 32 lanes: NVFP4 rounds to nearest even by Encoder.
  static constexpr bool kTable32 = false;
  WEFT_SIMD_INLINE static F loadf(const float* p) {
    return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)};
  }
  WEFT_SIMD_INLINE static void storef(float* p, F v) {
    _mm256_storeu_ps(p, v.lo);
    _mm256_storeu_ps(p + 8, v.hi);
  }
  WEFT_SIMD_INLINE static U load32(const uint32_t* p) {
    return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8))};
  }
  WEFT_SIMD_INLINE static void store32(uint32_t* p, U v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v.lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + 8), v.hi);
  }
  WEFT_SIMD_INLINE static U bits(F v) {
    return {_mm256_castps_si256(v.lo), _mm256_castps_si256(v.hi)};
  }
  WEFT_SIMD_INLINE static F fl(U v) {
    return {_mm256_castsi256_ps(v.lo), _mm256_castsi256_ps(v.hi)};
  }
  WEFT_SIMD_INLINE static U add(U a, U b) {
    return {_mm256_add_epi32(a.lo, b.lo), _mm256_add_epi32(a.hi, b.hi)};
  }
  WEFT_SIMD_INLINE static U sub(U a, U b) {
    return {_mm256_sub_epi32(a.lo, b.lo), _mm256_sub_epi32(a.hi, b.hi)};
  }
  WEFT_SIMD_INLINE static U band(U a, U b) {
    return {_mm256_and_si256(a.lo, b.lo), _mm256_and_si256(a.hi, b.hi)};
  }
  WEFT_SIMD_INLINE static U bor(U a, U b) {
    return {_mm256_or_si256(a.lo, b.lo), _mm256_or_si256(a.hi, b.hi)};
  }
  WEFT_SIMD_INLINE static U bxor(U a, U b) {
    return {_mm256_xor_si256(a.lo, b.lo), _mm256_xor_si256(a.hi, b.hi)};
  }
  WEFT_SIMD_INLINE static U xor3(U a, U b, U c) { return bxor(bxor(a, b), c); }
  template <int N>
  WEFT_SIMD_INLINE static U shr(U a) {
    return {_mm256_srli_epi32(a.lo, N), _mm256_srli_epi32(a.hi, N)};
  }
  template <int N>
  WEFT_SIMD_INLINE static U shl(U a) {
    return {_mm256_slli_epi32(a.lo, N), _mm256_slli_epi32(a.hi, N)};
  }
  WEFT_SIMD_INLINE static U minu(U a, U b) {
    return {_mm256_min_epu32(a.lo, b.lo), _mm256_min_epu32(a.hi, b.hi)};
  }
  WEFT_SIMD_INLINE static U maxu(U a, U b) {
    return {_mm256_max_epu32(a.lo, b.lo), _mm256_max_epu32(a.hi, b.hi)};
  }
  WEFT_SIMD_INLINE static M gts(U a, U b) {
    return {_mm256_cmpgt_epi32(a.lo, b.lo), _mm256_cmpgt_epi32(a.hi, b.hi)};
  }
  WEFT_SIMD_INLINE static M eq(U a, U b) {
    return {_mm256_cmpeq_epi32(a.lo, b.lo), _mm256_cmpeq_epi32(a.hi, b.hi)};
  }
  WEFT_SIMD_INLINE static M mand(M a, M b) { return band(a, b); }
  WEFT_SIMD_INLINE static bool any(M m) {
    const __m256i both = _mm256_or_si256(m.lo, m.hi);
    return !_mm256_testz_si256(both, both);
  }
  WEFT_SIMD_INLINE static M mnot(M a) { return bxor(a, u(0xffffffffu)); }
  WEFT_SIMD_INLINE static U sel(M m, U a, U b) {
    return {_mm256_blendv_epi8(b.lo, a.lo, m.lo), _mm256_blendv_epi8(b.hi, a.hi, m.hi)};
  }
  // a + 1 where m, else a (m is -1 where true).
  WEFT_SIMD_INLINE static U inc_if(M m, U a) { return sub(a, m); }
  // a | b where m, else a.
  WEFT_SIMD_INLINE static U or_if(M m, U a, U b) { return bor(a, band(m, b)); }
  WEFT_SIMD_INLINE static M fgt(F a, F b) {
    return {_mm256_castps_si256(_mm256_cmp_ps(a.lo, b.lo, _CMP_GT_OQ)),
            _mm256_castps_si256(_mm256_cmp_ps(a.hi, b.hi, _CMP_GT_OQ))};
  }
  // x - floor(x) (exact).
  WEFT_SIMD_INLINE static F frac(F x) {
    constexpr int kFloor = _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC;
    return {_mm256_sub_ps(x.lo, _mm256_round_ps(x.lo, kFloor)),
            _mm256_sub_ps(x.hi, _mm256_round_ps(x.hi, kFloor))};
  }
  WEFT_SIMD_INLINE static F fadd(F a, F b) {
    return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
  }
  WEFT_SIMD_INLINE static F fsub(F a, F b) {
    return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)};
  }
  WEFT_SIMD_INLINE static F fmul(F a, F b) {
    return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)};
  }
  WEFT_SIMD_INLINE static F fdiv(F a, F b) {
    return {_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)};
  }
  WEFT_SIMD_INLINE static F cvt(U a) {
    return {_mm256_cvtepi32_ps(a.lo), _mm256_cvtepi32_ps(a.hi)};
  }
  WEFT_SIMD_INLINE static U cvtt(F a) {
    return {_mm256_cvttps_epi32(a.lo), _mm256_cvttps_epi32(a.hi)};
  }
  WEFT_SIMD_INLINE static F gather(const float* table, U idx) {
    return {_mm256_i32gather_ps(table, idx.lo, 4), _mm256_i32gather_ps(table, idx.hi, 4)};
  }
  WEFT_SIMD_INLINE static uint32_t hmax(U a) {
    __m256i m = _mm256_max_epu32(a.lo, a.hi);
    m = _mm256_max_epu32(m, _mm256_permute2x128_si256(m, m, 1));
    m = _mm256_max_epu32(m, _mm256_shuffle_epi32(m, 0x4e));
    m = _mm256_max_epu32(m, _mm256_shuffle_epi32(m, 0xb1));
    return static_cast<uint32_t>(_mm_cvtsi128_si32(_mm256_castsi256_si128(m)));
  }

  // Lane b: the largest lane of a[b] (unsigned), by halving steps that pair
  // the vectors up; they leave vector a[b'] in lane b, b' running 0, 2, 4,
  // 6, 1, 3, 5, 7 and again from 8, so the inputs are taken in the inverse order.
  WEFT_SIMD_INLINE static U reduce_max16(const U* a) {
    static constexpr int kOrder[16] = {0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15};
    __m256i m[16], p[8], q[4], r[2];
    for (int b = 0; b < 16; ++b) m[b] = _mm256_max_epu32(a[kOrder[b]].lo, a[kOrder[b]].hi);
    for (int k = 0; k < 8; ++k) {
      const __m256i x = m[2 * k], y = m[2 * k + 1];
      p[k] = _mm256_max_epu32(_mm256_permute2x128_si256(x, y, 0x20),
                              _mm256_permute2x128_si256(x, y, 0x31));
    }
    for (int k = 0; k < 4; ++k) {
      const __m256i x = p[2 * k], y = p[2 * k + 1];
      q[k] = _mm256_max_epu32(_mm256_unpacklo_epi64(x, y), _mm256_unpackhi_epi64(x, y));
    }
    for (int k = 0; k < 2; ++k) {
      const __m256 x = _mm256_castsi256_ps(q[2 * k]), y = _mm256_castsi256_ps(q[2 * k + 1]);
      r[k] = _mm256_max_epu32(_mm256_castps_si256(_mm256_shuffle_ps(x, y, 0x88)),
                              _mm256_castps_si256(_mm256_shuffle_ps(x, y, 0xdd)));
    }
    return {r[0], r[1]};
  }

  // Bytes: 16 lanes' low bytes (each below 256) as one xmm, and back.
  WEFT_SIMD_INLINE static __m128i narrow(U a) {
    const __m256i w = _mm256_permute4x64_epi64(_mm256_packus_epi32(a.lo, a.hi), 0xd8);
    return _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
  }
  WEFT_SIMD_INLINE static U widen(__m128i b) {
    return {_mm256_cvtepu8_epi32(b), _mm256_cvtepu8_epi32(_mm_srli_si128(b, 8))};
  }
  WEFT_SIMD_INLINE static __m128i load128(const uint8_t* p) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  }
  WEFT_SIMD_INLINE static void store128(uint8_t* p, __m128i v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v);
  }
  WEFT_SIMD_INLINE static __m128i load64(const uint8_t* p) {
    return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  }
  WEFT_SIMD_INLINE static void store64(uint8_t* p, __m128i v) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p), v);
  }
  WEFT_SIMD_INLINE static void stream64(uint8_t* p, const uint8_t* src) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p),
                        _mm256_load_si256(reinterpret_cast<const __m256i*>(src)));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p + 32),
                        _mm256_load_si256(reinterpret_cast<const __m256i*>(src + 32)));
  }
  WEFT_SIMD_INLINE static void store8(uint8_t* p, U a) { store128(p, narrow(a)); }

  // ---- 64 bytes of codes, made by packs (one instruction per two or four
  // registers, where narrow() takes four per vector) ----

  struct B {
    __m256i lo, hi;
  };
  // Four vectors' lanes (each below 256) as bytes: a's, then b's, c's, d's.
  // In each half, the packs leave 128-bit lane l holding lanes 4l .. 4l + 3
  // and 4l + 8 .. 4l + 11 of each of two vectors: a dword permute puts them
  // in order.
  WEFT_SIMD_INLINE static B pack8(U a, U b, U c, U d) {
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i ab =
        _mm256_packus_epi16(_mm256_packus_epi32(a.lo, a.hi), _mm256_packus_epi32(b.lo, b.hi));
    const __m256i cd =
        _mm256_packus_epi16(_mm256_packus_epi32(c.lo, c.hi), _mm256_packus_epi32(d.lo, d.hi));
    return {_mm256_permutevar8x32_epi32(ab, order), _mm256_permutevar8x32_epi32(cd, order)};
  }
  // Eight vectors' lanes (each below 16) as nibbles, two a byte (the even
  // lane low): v[0]'s 8 bytes, then v[1]'s ... In each half (four vectors),
  // bytes as pack8 leaves them, pairs joined by a multiply-add (low + 16 ·
  // high) and packed again: 128-bit lane l holds the 16-bit words 2k + l (k <
  // 4) of each vector's result, which interleaving the two lanes puts in order.
  WEFT_SIMD_INLINE static B pack4(const U* v) {
    const __m256i join = _mm256_set1_epi16(0x1001);  // bytes 1, 16
    __m256i r[4];
    for (int i = 0; i < 4; ++i) {
      const U& a = v[2 * i];
      const U& b = v[2 * i + 1];
      const __m256i q =
          _mm256_packus_epi16(_mm256_packus_epi32(a.lo, a.hi), _mm256_packus_epi32(b.lo, b.hi));
      r[i] = _mm256_maddubs_epi16(q, join);
    }
    __m256i out[2];
    for (int h = 0; h < 2; ++h) {
      const __m256i w = _mm256_packus_epi16(r[2 * h], r[2 * h + 1]);
      const __m256i swapped = _mm256_permute4x64_epi64(w, 0x4e);
      out[h] = _mm256_permute2x128_si256(_mm256_unpacklo_epi16(w, swapped),
                                         _mm256_unpackhi_epi16(w, swapped), 0x20);
    }
    return {out[0], out[1]};
  }
  // ---- 64 bytes as byte lanes (mx_cols_t: MXFP8 codes rescaled) ----

  // 16 bytes from each of p, p + ld, p + 2 ld, p + 3 ld.
  WEFT_SIMD_INLINE static B load4x16(const uint8_t* p, int64_t ld) {
    return {_mm256_set_m128i(load128(p + ld), load128(p)),
            _mm256_set_m128i(load128(p + 3 * ld), load128(p + 2 * ld))};
  }
  // a, a, b, b: 16 bytes each.
  WEFT_SIMD_INLINE static B twice2(__m128i a, __m128i b) {
    return {_mm256_broadcastsi128_si256(a), _mm256_broadcastsi128_si256(b)};
  }
  // Byte g of `four` in each byte of the 16-byte group g.
  WEFT_SIMD_INLINE static B spread4(uint32_t four) {
    const __m256i v = _mm256_set1_epi32(static_cast<int>(four));
    return {
        _mm256_shuffle_epi8(v, _mm256_setr_epi64x(0, 0, 0x0101010101010101, 0x0101010101010101)),
        _mm256_shuffle_epi8(v, _mm256_setr_epi64x(0x0202020202020202, 0x0202020202020202,
                                                  0x0303030303030303, 0x0303030303030303))};
  }
  // MXFP8 codes cr under e8m0 scales er, as codes under scales ec, by byte
  // lane (see mx_cols_t): the same code where er = ec, else the magnitude
  // moved by (er - ec) binades (2^Man codes each) where both scales are
  // ordinary (1 .. 0xfd) and the magnitude is normal before and after
  // (2^Man + 1 .. MaxCode). Whether every lane took one of those ways.
  template <int Man, int MaxCode>
  WEFT_SIMD_INLINE static bool rescale_codes(B cr, B er, B ec, B& out) {
    const __m256i one = _mm256_set1_epi8(1), top = _mm256_set1_epi8(static_cast<char>(0xfc));
    const __m256i cap = _mm256_set1_epi8(31);
    const __m256i keep = _mm256_set1_epi8(static_cast<char>(0xff << Man));
    const __m256i lo = _mm256_set1_epi8((1 << Man) + 1), hi = _mm256_set1_epi8(MaxCode);
    const __m256i low7 = _mm256_set1_epi8(0x7f);
    // Unsigned a <= b, a >= b: all ones where true.
    auto le = [](__m256i a, __m256i b) { return _mm256_cmpeq_epi8(_mm256_min_epu8(a, b), a); };
    auto ge = [](__m256i a, __m256i b) { return _mm256_cmpeq_epi8(_mm256_max_epu8(a, b), a); };
    if (_mm256_movemask_epi8(_mm256_and_si256(_mm256_cmpeq_epi8(er.lo, ec.lo),
                                              _mm256_cmpeq_epi8(er.hi, ec.hi))) == -1) {
      out = cr;  // one scale: the same codes
      return true;
    }
    bool all = true;
    __m256i* outs[2] = {&out.lo, &out.hi};
    for (int h = 0; h < 2; ++h) {
      const __m256i r = h ? cr.hi : cr.lo, a = h ? er.hi : er.lo, c = h ? ec.hi : ec.lo;
      const __m256i same = _mm256_cmpeq_epi8(a, c);
      __m256i ok =
          _mm256_and_si256(le(_mm256_sub_epi8(a, one), top), le(_mm256_sub_epi8(c, one), top));
      const __m256i mag = _mm256_and_si256(r, low7);
      const __m256i up = _mm256_and_si256(
          _mm256_slli_epi16(_mm256_min_epu8(_mm256_subs_epu8(a, c), cap), Man), keep);
      const __m256i down = _mm256_and_si256(
          _mm256_slli_epi16(_mm256_min_epu8(_mm256_subs_epu8(c, a), cap), Man), keep);
      const __m256i t = _mm256_subs_epu8(_mm256_adds_epu8(mag, up), down);
      ok = _mm256_and_si256(ok,
                            _mm256_and_si256(ge(mag, lo), _mm256_and_si256(ge(t, lo), le(t, hi))));
      const __m256i moved = _mm256_or_si256(t, _mm256_andnot_si256(low7, r));
      *outs[h] = _mm256_blendv_epi8(moved, r, same);
      all = all && _mm256_movemask_epi8(_mm256_or_si256(ok, same)) == -1;
    }
    return all;
  }
  // To p, past the caches where `stream` and p is a line.
  WEFT_SIMD_INLINE static void put64(uint8_t* p, B v, bool stream) {
    auto* d = reinterpret_cast<__m256i*>(p);
    if (stream && (reinterpret_cast<uintptr_t>(p) & 63) == 0) {
      _mm256_stream_si256(d, v.lo);
      _mm256_stream_si256(d + 1, v.hi);
    } else {
      _mm256_storeu_si256(d, v.lo);
      _mm256_storeu_si256(d + 1, v.hi);
    }
  }
  // 16 nibbles (lanes < 16), two a byte, the even lane low.
  WEFT_SIMD_INLINE static void store4(uint8_t* p, U a) {
    const __m128i b = narrow(a);
    const __m128i w = _mm_and_si128(_mm_or_si128(b, _mm_srli_epi16(b, 4)), _mm_set1_epi16(0xff));
    store64(p, _mm_packus_epi16(w, w));
  }

  // Two blocks of 16 nibbles, 16 bytes: a's, then b's.
  WEFT_SIMD_INLINE static void store4x2(uint8_t* p, U a, U b) {
    const __m128i ba = narrow(a), bb = narrow(b), low = _mm_set1_epi16(0xff);
    const __m128i wa = _mm_and_si128(_mm_or_si128(ba, _mm_srli_epi16(ba, 4)), low);
    const __m128i wb = _mm_and_si128(_mm_or_si128(bb, _mm_srli_epi16(bb, 4)), low);
    store128(p, _mm_packus_epi16(wa, wb));
  }

  // 16 lines of 64 bytes: in each 128-bit lane, the 16x16 transpose of the
  // lines' 16-byte parts (four perfect shuffles); line j of the result to
  // dst + j · ldd, past the caches where `stream` and dst is aligned. The
  // two halves of the lines are transposed one after the other, so a line
  // streamed out goes whole, from a buffer: halves written 16 stores apart
  // would leave the write-combining buffers as partial lines.
  WEFT_SIMD_INLINE static void transpose_lines(const uint8_t* src, uint8_t* dst, int64_t ldd,
                                               bool stream) {
    const bool nt = stream && ((reinterpret_cast<uintptr_t>(dst) | ldd) & 63) == 0;
    alignas(64) uint8_t lines[16 * 64];
    for (int h = 0; h < 2; ++h) {
      __m256i t[16];
      for (int i = 0; i < 16; ++i) {
        t[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 64 * i + 32 * h));
      }
      for (int pass = 0; pass < 4; ++pass) {
        __m256i o[16];
        for (int i = 0; i < 8; ++i) {
          o[2 * i] = _mm256_unpacklo_epi8(t[i], t[i + 8]);
          o[2 * i + 1] = _mm256_unpackhi_epi8(t[i], t[i + 8]);
        }
        for (int i = 0; i < 16; ++i) t[i] = o[i];
      }
      for (int j = 0; j < 16; ++j) {
        if (nt) {
          _mm256_store_si256(reinterpret_cast<__m256i*>(lines + 64 * j + 32 * h), t[j]);
        } else {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j * ldd + 32 * h), t[j]);
        }
      }
    }
    if (nt) {
      for (int j = 0; j < 16; ++j) stream64(dst + j * ldd, lines + 64 * j);
    }
  }

  // ---- Philox-4x32-10, sixteen blocks a vector (one to a lane): lane i
  // holds block kLaneBlock[i] of the group, so that the 4x4 transposes
  // inside each 128-bit lane leave the words in stream order. (Sixteen
  // 64-bit products take four multiplies here either way; the low halves by
  // mullo keep the shuffles off the multipliers' ports.) ----

  static constexpr int kPhiloxBlocks = 16;
  WEFT_SIMD_INLINE static void philox_counters(uint64_t first, U& c0, U& c1) {
    static constexpr uint32_t kLaneBlock[16] = {0, 4, 8,  12, 1, 5, 9,  13,
                                                2, 6, 10, 14, 3, 7, 11, 15};
    const auto lo = static_cast<uint32_t>(first), hi = static_cast<uint32_t>(first >> 32);
    if (lo <= 0xffffffffu - 15) {
      c0 = add(u(lo), load32(kLaneBlock));
      c1 = u(hi);
    } else {  // the group straddles a carry into the high word
      alignas(32) uint32_t l[16], h[16];
      for (int i = 0; i < 16; ++i) {
        const uint64_t blk = first + kLaneBlock[i];
        l[i] = static_cast<uint32_t>(blk);
        h[i] = static_cast<uint32_t>(blk >> 32);
      }
      c0 = load32(l);
      c1 = load32(h);
    }
  }
  // hi, lo: the halves of each lane's a · m (64 bits).
  WEFT_SIMD_INLINE static void mul_wide(U a, uint32_t m, U& hi, U& lo) {
    const __m256i mv = _mm256_set1_epi32(static_cast<int>(m));
    const __m256i* halves[2] = {&a.lo, &a.hi};
    __m256i* his[2] = {&hi.lo, &hi.hi};
    __m256i* los[2] = {&lo.lo, &lo.hi};
    for (int h = 0; h < 2; ++h) {
      const __m256i x = *halves[h];
      const __m256i even = _mm256_mul_epu32(x, mv);
      const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), mv);
      *his[h] = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xaa);
      *los[h] = _mm256_mullo_epi32(x, mv);
    }
  }
  // One round under the keys k0, k1.
  WEFT_SIMD_INLINE static void philox_round(U& c0, U& c1, U& c2, U& c3, U k0, U k1) {
    U hi0, lo0, hi1, lo1;
    mul_wide(c0, 0xD2511F53u, hi0, lo0);
    mul_wide(c2, 0xCD9E8D57u, hi1, lo1);
    c0 = xor3(hi1, c1, k0);
    c1 = lo1;
    c2 = xor3(hi0, c3, k1);
    c3 = lo0;
  }
  // The group's words in stream order (block j's at out[4j ..]): within each
  // 128-bit lane, the 4x4 transpose of (c0, c1, c2, c3).
  WEFT_SIMD_INLINE static void philox_words(U c0, U c1, U c2, U c3, uint32_t* out) {
    for (int h = 0; h < 2; ++h) {
      const __m256i a = h ? c0.hi : c0.lo, b = h ? c1.hi : c1.lo;
      const __m256i c = h ? c2.hi : c2.lo, d = h ? c3.hi : c3.lo;
      const __m256i t0 = _mm256_unpacklo_epi32(a, b), t1 = _mm256_unpackhi_epi32(a, b);
      const __m256i t2 = _mm256_unpacklo_epi32(c, d), t3 = _mm256_unpackhi_epi32(c, d);
      auto* o = reinterpret_cast<__m256i*>(out + 8 * h);
      _mm256_storeu_si256(o, _mm256_unpacklo_epi64(t0, t2));
      _mm256_storeu_si256(o + 2, _mm256_unpackhi_epi64(t0, t2));
      _mm256_storeu_si256(o + 4, _mm256_unpacklo_epi64(t1, t3));
      _mm256_storeu_si256(o + 6, _mm256_unpackhi_epi64(t1, t3));
    }
  }
};

#include "weft/kernels/cpu/cast_simd.inc"
#include "weft/kernels/cpu/cast_simd_tiles.inc"

}  // namespace

const Kernels* avx2_kernels() { return &kKernels; }

}  // namespace weft::kernels::cpu::cast_simd

#else
namespace weft::kernels::cpu::cast_simd {
const Kernels* avx2_kernels() { return nullptr; }
}  // namespace weft::kernels::cpu::cast_simd
#endif
