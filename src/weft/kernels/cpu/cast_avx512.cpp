// The cast kernels of cast_simd.h for AVX-512 (F, BW, VL, DQ): this file
// alone gets the -m flags (see CMakeLists.txt). Only <immintrin.h>,
// <stdint.h> and cast_simd.inc, in an unnamed namespace: nothing another
// file could pick up compiled for a processor it may not run on.
#include "weft/kernels/cpu/cast_simd.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <stdint.h>

#define WEFT_SIMD_INLINE [[gnu::always_inline]] inline

namespace weft::kernels::cpu::cast_simd {
namespace {

constexpr const char* kIsaName = "avx512";

// 4 (b mod 4) + b / 4: the transpose of a 4x4 grid of lanes (its own inverse).
constexpr int kTranspose4[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};

// 2j + 1: the high 16-bit halves of two vectors' lanes (V::high16).
constexpr short kHighHalves[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31,
                                   33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 63};

// 8 (j mod 4) + j / 4: the 16-bit words of V::pack4's last pack put in order.
constexpr short kNibbleOrder[32] = {0, 8,  16, 24, 1, 9,  17, 25, 2, 10, 18, 26, 3, 11, 19, 27,
                                    4, 12, 20, 28, 5, 13, 21, 29, 6, 14, 22, 30, 7, 15, 23, 31};

// 16 lanes: one register.
struct V {
  using F = __m512;
  using U = __m512i;
  using M = __mmask16;
  WEFT_SIMD_INLINE static U u(uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }
  // x made opaque: the compiler keeps it where it is instead of rebuilding it.
  WEFT_SIMD_INLINE static void hold(U& x) { asm("" : "+v"(x)); }
  WEFT_SIMD_INLINE static F f(float v) { return _mm512_set1_ps(v); }
  // 32 registers: the kernels may keep 16 vectors of accumulators in them.
  static constexpr int kAccumulators = 16;
  // Philox groups computed side by side (kernels/cpu/cast_simd.inc).
  static constexpr int kPhiloxGroups = 4;
  // NVFP4 round-to-nearest-even through a table of 32 lanes (E2m1Table).
  static constexpr bool kTable32 = true;
  WEFT_SIMD_INLINE static F loadf(const float* p) { return _mm512_loadu_ps(p); }
  WEFT_SIMD_INLINE static void storef(float* p, F v) { _mm512_storeu_ps(p, v); }
  WEFT_SIMD_INLINE static U load32(const uint32_t* p) { return _mm512_loadu_si512(p); }
  WEFT_SIMD_INLINE static void store32(uint32_t* p, U v) { _mm512_storeu_si512(p, v); }
  WEFT_SIMD_INLINE static U bits(F v) { return _mm512_castps_si512(v); }
  WEFT_SIMD_INLINE static F fl(U v) { return _mm512_castsi512_ps(v); }
  WEFT_SIMD_INLINE static U add(U a, U b) { return _mm512_add_epi32(a, b); }
  WEFT_SIMD_INLINE static U sub(U a, U b) { return _mm512_sub_epi32(a, b); }
  WEFT_SIMD_INLINE static U band(U a, U b) { return _mm512_and_si512(a, b); }
  WEFT_SIMD_INLINE static U bor(U a, U b) { return _mm512_or_si512(a, b); }
  WEFT_SIMD_INLINE static U xor3(U a, U b, U c) { return _mm512_ternarylogic_epi32(a, b, c, 0x96); }
  template <int N>
  WEFT_SIMD_INLINE static U shr(U a) {
    return _mm512_srli_epi32(a, N);
  }
  template <int N>
  WEFT_SIMD_INLINE static U shl(U a) {
    return _mm512_slli_epi32(a, N);
  }
  WEFT_SIMD_INLINE static U minu(U a, U b) { return _mm512_min_epu32(a, b); }
  WEFT_SIMD_INLINE static U maxu(U a, U b) { return _mm512_max_epu32(a, b); }
  WEFT_SIMD_INLINE static M gts(U a, U b) { return _mm512_cmpgt_epi32_mask(a, b); }
  WEFT_SIMD_INLINE static M eq(U a, U b) { return _mm512_cmpeq_epi32_mask(a, b); }
  WEFT_SIMD_INLINE static M mand(M a, M b) { return _kand_mask16(a, b); }
  WEFT_SIMD_INLINE static bool any(M m) { return m != 0; }
  WEFT_SIMD_INLINE static M mnot(M a) { return _knot_mask16(a); }
  WEFT_SIMD_INLINE static U sel(M m, U a, U b) { return _mm512_mask_blend_epi32(m, b, a); }
  // a + 1 where m, else a.
  WEFT_SIMD_INLINE static U inc_if(M m, U a) { return _mm512_mask_sub_epi32(a, m, a, u(~0u)); }
  // a | b where m, else a.
  WEFT_SIMD_INLINE static U or_if(M m, U a, U b) { return _mm512_mask_or_epi32(a, m, a, b); }
  // Lanes whose bits under `mask` are not all zero.
  WEFT_SIMD_INLINE static M any_bits(U a, U mask) { return _mm512_test_epi32_mask(a, mask); }
  // t[idx & 31] of the 32 lanes of t0 (0 .. 15) and t1 (16 .. 31).
  WEFT_SIMD_INLINE static U table32(U idx, U t0, U t1) {
    return _mm512_permutex2var_epi32(t0, idx, t1);
  }
  WEFT_SIMD_INLINE static M fgt(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }

  // ---- 32 16-bit lanes (the codes of two vectors, E2m1Table::pair) ----

  // The high 16-bit halves of a's lanes, then of b's.
  WEFT_SIMD_INLINE static U high16(U a, U b) {
    return _mm512_permutex2var_epi16(a, _mm512_loadu_si512(kHighHalves), b);
  }
  template <int N>
  WEFT_SIMD_INLINE static U shr16(U a) {
    return _mm512_srli_epi16(a, N);
  }
  WEFT_SIMD_INLINE static U subs16(U a, U b) { return _mm512_subs_epu16(a, b); }  // saturating
  WEFT_SIMD_INLINE static U min16(U a, U b) { return _mm512_min_epu16(a, b); }
  // a's lanes' mask, then b's, as one of 32 16-bit lanes.
  WEFT_SIMD_INLINE static __mmask32 join(M a, M b) { return _mm512_kunpackw(b, a); }
  // t[idx & 63] of the 64 16-bit lanes of t0 (0 .. 31) and t1 (32 .. 63).
  WEFT_SIMD_INLINE static U table64(U idx, U t0, U t1) {
    return _mm512_permutex2var_epi16(t0, idx, t1);
  }
  // a + c where m, else a.
  WEFT_SIMD_INLINE static U add16_if(__mmask32 m, U a, uint16_t c) {
    return _mm512_mask_add_epi16(a, m, a, _mm512_set1_epi16(static_cast<short>(c)));
  }
  // x - floor(x) (exact).
  WEFT_SIMD_INLINE static F frac(F x) {
    return _mm512_reduce_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  }
  WEFT_SIMD_INLINE static F fadd(F a, F b) { return _mm512_add_ps(a, b); }
  WEFT_SIMD_INLINE static F fsub(F a, F b) { return _mm512_sub_ps(a, b); }
  WEFT_SIMD_INLINE static F fmul(F a, F b) { return _mm512_mul_ps(a, b); }
  WEFT_SIMD_INLINE static F fdiv(F a, F b) { return _mm512_div_ps(a, b); }
  WEFT_SIMD_INLINE static F cvt(U a) { return _mm512_cvtepi32_ps(a); }
  WEFT_SIMD_INLINE static U cvtt(F a) { return _mm512_cvttps_epi32(a); }
  WEFT_SIMD_INLINE static F gather(const float* table, U idx) {
    return _mm512_i32gather_ps(idx, table, 4);
  }
  WEFT_SIMD_INLINE static uint32_t hmax(U a) { return _mm512_reduce_max_epu32(a); }
  // Lane b: the largest lane of a[b] (unsigned), by halving steps that pair
  // the vectors up; they leave vector a[4 (b mod 4) + b / 4] in lane b, so
  // the inputs are taken in that order.
  WEFT_SIMD_INLINE static U reduce_max16(const U* a) {
    U c[8], d[4], e[2];
    for (int k = 0; k < 8; ++k) {
      const U x = a[kTranspose4[2 * k]], y = a[kTranspose4[2 * k + 1]];
      c[k] = _mm512_max_epu32(_mm512_shuffle_i64x2(x, y, 0x44), _mm512_shuffle_i64x2(x, y, 0xee));
    }
    for (int k = 0; k < 4; ++k) {
      const U x = c[2 * k], y = c[2 * k + 1];
      d[k] = _mm512_max_epu32(_mm512_shuffle_i64x2(x, y, 0x88), _mm512_shuffle_i64x2(x, y, 0xdd));
    }
    for (int k = 0; k < 2; ++k) {
      const U x = d[2 * k], y = d[2 * k + 1];
      e[k] = _mm512_max_epu32(_mm512_unpacklo_epi64(x, y), _mm512_unpackhi_epi64(x, y));
    }
    const __m512 x = _mm512_castsi512_ps(e[0]), y = _mm512_castsi512_ps(e[1]);
    return _mm512_max_epu32(_mm512_castps_si512(_mm512_shuffle_ps(x, y, 0x88)),
                            _mm512_castps_si512(_mm512_shuffle_ps(x, y, 0xdd)));
  }

  // Bytes: 16 lanes' low bytes as one xmm, and back.
  WEFT_SIMD_INLINE static __m128i narrow(U a) { return _mm512_cvtepi32_epi8(a); }
  WEFT_SIMD_INLINE static U widen(__m128i b) { return _mm512_cvtepu8_epi32(b); }
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
    _mm512_stream_si512(reinterpret_cast<__m512i*>(p), _mm512_load_si512(src));
  }
  WEFT_SIMD_INLINE static void store8(uint8_t* p, U a) { store128(p, narrow(a)); }

  // ---- 64 bytes of codes, made by packs (one instruction per two or four
  // vectors, where narrow() takes one per vector) ----

  using B = __m512i;
  // Four vectors' lanes (each below 256) as bytes: a's, then b's, c's, d's.
  // The packs leave 128-bit lane l holding lanes 4l .. 4l + 3 of a, b, c
  // and d in turn: a 4x4 transpose of dwords puts them in order.
  WEFT_SIMD_INLINE static B pack8(U a, U b, U c, U d) {
    const U bytes = _mm512_packus_epi16(_mm512_packus_epi32(a, b), _mm512_packus_epi32(c, d));
    return _mm512_permutexvar_epi32(_mm512_loadu_si512(kTranspose4), bytes);
  }
  // Eight vectors' lanes (each below 16) as nibbles, two a byte (the even
  // lane low): v[0]'s 8 bytes, then v[1]'s ... Bytes as pack8 leaves them in
  // lane l (lanes 4l .. 4l + 3 of four vectors), pairs joined by a multiply-add
  // (low + 16 · high), packed again (lane l: bytes 2l, 2l + 1 of each of the
  // eight vectors' results), the 16-bit words put in order.
  WEFT_SIMD_INLINE static B pack4(const U* v) {
    const U q0 =
        _mm512_packus_epi16(_mm512_packus_epi32(v[0], v[1]), _mm512_packus_epi32(v[2], v[3]));
    const U q1 =
        _mm512_packus_epi16(_mm512_packus_epi32(v[4], v[5]), _mm512_packus_epi32(v[6], v[7]));
    const U join = _mm512_set1_epi16(0x1001);  // bytes 1, 16
    const U w = _mm512_packus_epi16(_mm512_maddubs_epi16(q0, join), _mm512_maddubs_epi16(q1, join));
    return _mm512_permutexvar_epi16(_mm512_loadu_si512(kNibbleOrder), w);
  }
  // Four vectors of 32 16-bit lanes (each below 16) as nibbles, two a byte
  // (the even lane low): w0's 16 bytes, then w1's ... Packed to bytes
  // (lane l: lanes 8l .. 8l + 7 of two vectors), pairs joined by a
  // multiply-add and packed again (lane l: bytes 4l .. 4l + 3 of each
  // vector's result), the dwords put in order.
  WEFT_SIMD_INLINE static B pack4w(U w0, U w1, U w2, U w3) {
    const U join = _mm512_set1_epi16(0x1001);  // bytes 1, 16
    const U f = _mm512_packus_epi16(_mm512_maddubs_epi16(_mm512_packus_epi16(w0, w1), join),
                                    _mm512_maddubs_epi16(_mm512_packus_epi16(w2, w3), join));
    return _mm512_permutexvar_epi32(_mm512_loadu_si512(kTranspose4), f);
  }
  // ---- 64 bytes as byte lanes (mx_cols_t: MXFP8 codes rescaled) ----

  // 16 bytes from each of p, p + ld, p + 2 ld, p + 3 ld.
  WEFT_SIMD_INLINE static B load4x16(const uint8_t* p, int64_t ld) {
    B v = _mm512_castsi128_si512(load128(p));
    v = _mm512_inserti32x4(v, load128(p + ld), 1);
    v = _mm512_inserti32x4(v, load128(p + 2 * ld), 2);
    return _mm512_inserti32x4(v, load128(p + 3 * ld), 3);
  }
  // a, a, b, b: 16 bytes each.
  WEFT_SIMD_INLINE static B twice2(__m128i a, __m128i b) {
    return _mm512_inserti64x4(_mm512_broadcast_i32x4(a), _mm256_broadcastsi128_si256(b), 1);
  }
  // Byte g of `four` in each byte of the 16-byte group g.
  WEFT_SIMD_INLINE static B spread4(uint32_t four) {
    const B group =
        _mm512_set_epi64(0x0303030303030303, 0x0303030303030303, 0x0202020202020202,
                         0x0202020202020202, 0x0101010101010101, 0x0101010101010101, 0, 0);
    return _mm512_shuffle_epi8(_mm512_set1_epi32(static_cast<int>(four)), group);
  }
  // MXFP8 codes cr under e8m0 scales er, as codes under scales ec, by byte
  // lane (see mx_cols_t): the same code where er = ec, else the magnitude
  // moved by (er - ec) binades (2^Man codes each) where both scales are
  // ordinary (1 .. 0xfd) and the magnitude is normal before and after
  // (2^Man + 1 .. MaxCode). Whether every lane took one of those ways.
  template <int Man, int MaxCode>
  WEFT_SIMD_INLINE static bool rescale_codes(B cr, B er, B ec, B& out) {
    const B one = _mm512_set1_epi8(1), top = _mm512_set1_epi8(static_cast<char>(0xfc));
    const B cap = _mm512_set1_epi8(31), keep = _mm512_set1_epi8(static_cast<char>(0xff << Man));
    const B lo = _mm512_set1_epi8((1 << Man) + 1), hi = _mm512_set1_epi8(MaxCode);
    const __mmask64 same = _mm512_cmpeq_epi8_mask(er, ec);
    if (static_cast<uint64_t>(same) == ~uint64_t{0}) {  // one scale: the same codes
      out = cr;
      return true;
    }
    __mmask64 ok = _mm512_cmple_epu8_mask(_mm512_sub_epi8(er, one), top) &
                   _mm512_cmple_epu8_mask(_mm512_sub_epi8(ec, one), top);
    const B mag = _mm512_and_si512(cr, _mm512_set1_epi8(0x7f));
    // (binades up or down, at most 31) << Man: a 16-bit shift, the bits that
    // crossed into the next byte cleared.
    const B up = _mm512_and_si512(
        _mm512_slli_epi16(_mm512_min_epu8(_mm512_subs_epu8(er, ec), cap), Man), keep);
    const B down = _mm512_and_si512(
        _mm512_slli_epi16(_mm512_min_epu8(_mm512_subs_epu8(ec, er), cap), Man), keep);
    const B t = _mm512_subs_epu8(_mm512_adds_epu8(mag, up), down);
    ok = _mm512_mask_cmpge_epu8_mask(ok, mag, lo);
    ok = _mm512_mask_cmpge_epu8_mask(ok, t, lo);
    ok = _mm512_mask_cmple_epu8_mask(ok, t, hi);
    // t with cr's sign bit, or cr itself.
    const B moved =
        _mm512_ternarylogic_epi32(t, cr, _mm512_set1_epi8(static_cast<char>(0x80)), 0xd8);
    out = _mm512_mask_blend_epi8(same, moved, cr);
    return static_cast<uint64_t>(ok | same) == ~uint64_t{0};
  }
  // To p, past the caches where `stream` and p is a line.
  WEFT_SIMD_INLINE static void put64(uint8_t* p, B v, bool stream) {
    if (stream && (reinterpret_cast<uintptr_t>(p) & 63) == 0) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(p), v);
    } else {
      _mm512_storeu_si512(p, v);
    }
  }
  // 16 nibbles (lanes < 16), two a byte, the even lane low.
  WEFT_SIMD_INLINE static void store4(uint8_t* p, U a) {
    store64(p, _mm512_cvtepi64_epi8(_mm512_or_si512(a, _mm512_srli_epi64(a, 28))));
  }

  // Two blocks of 16 nibbles, 16 bytes: a's, then b's.
  WEFT_SIMD_INLINE static void store4x2(uint8_t* p, U a, U b) {
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const U xa = _mm512_or_si512(a, _mm512_srli_epi64(a, 28));
    const U xb = _mm512_or_si512(b, _mm512_srli_epi64(b, 28));
    store128(p, _mm512_cvtepi32_epi8(_mm512_permutex2var_epi32(xa, even, xb)));
  }

  // 16 lines of 64 bytes: in each 128-bit lane, the 16x16 transpose of the
  // lines' 16-byte parts (four perfect shuffles); line j of the result to
  // dst + j · ldd, past the caches where `stream` and dst is aligned.
  WEFT_SIMD_INLINE static void transpose_lines(const uint8_t* src, uint8_t* dst, int64_t ldd,
                                               bool stream) {
    U t[16];
    for (int i = 0; i < 16; ++i) t[i] = _mm512_loadu_si512(src + 64 * i);
    for (int pass = 0; pass < 4; ++pass) {
      U o[16];
      for (int i = 0; i < 8; ++i) {
        o[2 * i] = _mm512_unpacklo_epi8(t[i], t[i + 8]);
        o[2 * i + 1] = _mm512_unpackhi_epi8(t[i], t[i + 8]);
      }
      for (int i = 0; i < 16; ++i) t[i] = o[i];
    }
    const bool nt = stream && ((reinterpret_cast<uintptr_t>(dst) | ldd) & 63) == 0;
    for (int j = 0; j < 16; ++j) {
      if (nt) {
        _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + j * ldd), t[j]);
      } else {
        _mm512_storeu_si512(dst + j * ldd, t[j]);
      }
    }
  }

  // ---- Philox-4x32-10, eight blocks a vector: block j in 64-bit lane j,
  // its word in the lane's low half (what the multiplies read; the high
  // halves are never read back): a multiply gives a lane's whole product,
  // whose high half a shuffle moves down. ----

  static constexpr int kPhiloxBlocks = 8;
  // The counters of blocks first .. first + 7: their low words (c0) and high
  // words (c1).
  WEFT_SIMD_INLINE static void philox_counters(uint64_t first, U& c0, U& c1) {
    c0 = _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(first)),
                          _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
    c1 = _mm512_srli_epi64(c0, 32);
  }
  // One round under the keys k0, k1.
  WEFT_SIMD_INLINE static void philox_round(U& c0, U& c1, U& c2, U& c3, U k0, U k1) {
    const U p0 = _mm512_mul_epu32(c0, u(0xD2511F53u)), p1 = _mm512_mul_epu32(c2, u(0xCD9E8D57u));
    c0 = xor3(_mm512_shuffle_epi32(p1, _MM_PERM_DDBB), c1, k0);
    c1 = p1;
    c2 = xor3(_mm512_shuffle_epi32(p0, _MM_PERM_DDBB), c3, k1);
    c3 = p0;
  }
  // The group's words in stream order: block j's at out[4j .. 4j + 3].
  WEFT_SIMD_INLINE static void philox_words(U c0, U c1, U c2, U c3, uint32_t* out) {
    const U a = _mm512_mask_shuffle_epi32(c0, 0xaaaa, c1, _MM_PERM_CCAA);  // (c0, c1) a lane
    const U b = _mm512_mask_shuffle_epi32(c2, 0xaaaa, c3, _MM_PERM_CCAA);  // (c2, c3)
    _mm512_storeu_si512(
        out, _mm512_permutex2var_epi64(a, _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11), b));
    _mm512_storeu_si512(
        out + 16, _mm512_permutex2var_epi64(a, _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15), b));
  }
};

#include "weft/kernels/cpu/cast_simd.inc"
#include "weft/kernels/cpu/cast_simd_tiles.inc"

}  // namespace

const Kernels* avx512_kernels() { return &kKernels; }

}  // namespace weft::kernels::cpu::cast_simd

#else
namespace weft::kernels::cpu::cast_simd {
const Kernels* avx512_kernels() { return nullptr; }
}  // namespace weft::kernels::cpu::cast_simd
#endif
