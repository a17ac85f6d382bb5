// The 8- and 4-bit floating formats of dtype.h: one rounding routine and one
// decoder, parameterized by the format's fields; each public function adds only
// its format's rules for sign, NaN, Inf and overflow.
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <limits>

#include "weft/core/dtype.h"

namespace weft {
namespace {

// A code is the unsigned magnitude: exponent field << man_bits | mantissa field.
// With subnormals, field 0 holds 0.m * 2^(1 - bias); otherwise every field,
// 0 included, holds 1.m * 2^(field - bias) (e8m0 has no zero).
struct Format {
  int man_bits;
  int bias;
  bool subnormals;
  uint32_t max_code;  // largest finite magnitude
};

constexpr Format kE4M3{3, 7, true, 0x7e};     // 448
constexpr Format kE5M2{2, 15, true, 0x7b};    // 57344
constexpr Format kE8M0{0, 127, false, 0xfe};  // 2^127
constexpr Format kE2M1{1, 1, true, 0x7};      // 6

// Rounds the magnitude of a finite f32 (its bits, sign cleared) to the nearest
// code, ties to the even code. The result may exceed fmt.max_code; the caller
// decides what overflow means. Because codes are ordered like the values they
// hold, a carry out of the mantissa moves into the next binade by itself, and
// "even code" is exactly IEEE's "even last significand bit".
uint32_t round_magnitude(uint32_t abs_bits, const Format& fmt) {
  if (abs_bits == 0) return 0;
  // abs = sig * 2^(exp - 23) with sig in [2^23, 2^24), f32 subnormals normalized.
  int exp;
  uint32_t sig;
  if (abs_bits >= 0x00800000u) {
    exp = static_cast<int>(abs_bits >> 23) - 127;
    sig = (abs_bits & 0x007fffffu) | 0x00800000u;
  } else {
    int lead = std::countl_zero(abs_bits) - 8;
    sig = abs_bits << lead;
    exp = -126 - lead;
  }
  const int min_exp = fmt.subnormals ? 1 - fmt.bias : -fmt.bias;  // lowest binade
  if (exp < min_exp && !fmt.subnormals) return 0;  // the smallest value is the nearest
  // Bits of sig below the format's last mantissa bit; below the lowest binade
  // the spacing stays that of the lowest binade.
  const int shift = 23 - fmt.man_bits + std::max(0, min_exp - exp);
  if (shift > 24) return 0;  // below half the smallest subnormal
  const uint32_t kept = sig >> shift;
  const uint32_t man_mask = (1u << fmt.man_bits) - 1;
  uint32_t code = exp >= min_exp
                      ? (static_cast<uint32_t>(exp + fmt.bias) << fmt.man_bits) | (kept & man_mask)
                      : kept;
  const uint32_t rest = sig & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (code & 1u))) ++code;
  return code;
}

// Encoding shared by the signed formats with satfinite overflow: finite values
// beyond the largest and +-Inf become +-max. Formats with a NaN encode NaN as
// sign | all-ones (the one NaN of e4m3; CUDA's canonical NaN for e5m2); a
// format without one (e2m1) encodes NaN as +max.
uint8_t encode_satfinite(float f, const Format& fmt, int sign_shift, bool has_nan) {
  const uint32_t u = f32_to_bits(f);
  const uint32_t abs_bits = u & 0x7fffffffu;
  const uint32_t sign = (u >> 31) << sign_shift;
  if (abs_bits > 0x7f800000u) {
    return static_cast<uint8_t>(has_nan ? sign | ((1u << sign_shift) - 1) : fmt.max_code);
  }
  const uint32_t code = abs_bits == 0x7f800000u
                            ? fmt.max_code
                            : std::min(round_magnitude(abs_bits, fmt), fmt.max_code);
  return static_cast<uint8_t>(sign | code);
}

// Exact powers of two, usable in constant expressions (std::ldexp is not).
constexpr double pow2(int e) {
  double p = 1.0;
  for (; e > 0; --e) p *= 2.0;
  for (; e < 0; ++e) p *= 0.5;
  return p;
}

// The value of a finite code (every such value is exact in f32).
constexpr float decode_magnitude(uint32_t code, const Format& fmt) {
  const uint32_t field = code >> fmt.man_bits;
  const uint32_t man = code & ((1u << fmt.man_bits) - 1);
  if (field == 0 && fmt.subnormals) {
    return static_cast<float>(man * pow2(1 - fmt.bias - fmt.man_bits));
  }
  const uint32_t significand = (1u << fmt.man_bits) | man;
  return static_cast<float>(significand * pow2(static_cast<int>(field) - fmt.bias - fmt.man_bits));
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

constexpr std::array<float, 256> make_e4m3_table() {
  std::array<float, 256> t{};
  for (uint32_t v = 0; v < 256; ++v) {
    const uint32_t mag = v & 0x7fu;
    const float x = mag == 0x7fu ? kNaN : decode_magnitude(mag, kE4M3);
    t[v] = v & 0x80u ? -x : x;
  }
  return t;
}

constexpr std::array<float, 256> make_e5m2_table() {
  std::array<float, 256> t{};
  for (uint32_t v = 0; v < 256; ++v) {
    const uint32_t mag = v & 0x7fu;
    const float x = mag == 0x7cu ? kInf : mag > 0x7cu ? kNaN : decode_magnitude(mag, kE5M2);
    t[v] = v & 0x80u ? -x : x;
  }
  return t;
}

constexpr std::array<float, 256> make_e8m0_table() {
  std::array<float, 256> t{};
  for (uint32_t v = 0; v < 256; ++v) t[v] = v == 0xffu ? kNaN : decode_magnitude(v, kE8M0);
  return t;
}

constexpr std::array<float, 16> make_e2m1_table() {
  std::array<float, 16> t{};
  for (uint32_t v = 0; v < 16; ++v) {
    const float x = decode_magnitude(v & 0x7u, kE2M1);
    t[v] = v & 0x8u ? -x : x;
  }
  return t;
}

constexpr std::array<float, 256> kE4M3Values = make_e4m3_table();
constexpr std::array<float, 256> kE5M2Values = make_e5m2_table();
constexpr std::array<float, 256> kE8M0Values = make_e8m0_table();
constexpr std::array<float, 16> kE2M1Values = make_e2m1_table();

static_assert(kE4M3Values[0x7e] == 448.0f && kE4M3Values[0x01] == 0x1p-9f);
static_assert(kE5M2Values[0x7b] == 57344.0f && kE5M2Values[0x01] == 0x1p-16f);
static_assert(kE8M0Values[0x00] == 0x1p-127f && kE8M0Values[0xfe] == 0x1p127f);
static_assert(kE2M1Values[0x7] == 6.0f && kE2M1Values[0x1] == 0.5f && kE2M1Values[0xf] == -6.0f);

}  // namespace

uint8_t f32_to_e4m3(float f) { return encode_satfinite(f, kE4M3, 7, true); }
float e4m3_to_f32(uint8_t v) { return kE4M3Values[v]; }

uint8_t f32_to_e5m2(float f) { return encode_satfinite(f, kE5M2, 7, true); }
float e5m2_to_f32(uint8_t v) { return kE5M2Values[v]; }

uint8_t f32_to_e8m0(float f) {
  const uint32_t u = f32_to_bits(f);
  if ((u & 0x7fffffffu) == 0) return 0;  // +-0: the smallest scale, 2^-127
  if ((u >> 31) || (u & 0x7fffffffu) >= 0x7f800000u) return 0xff;  // negative, Inf, NaN
  return static_cast<uint8_t>(std::min(round_magnitude(u, kE8M0), kE8M0.max_code));
}
float e8m0_to_f32(uint8_t v) { return kE8M0Values[v]; }

uint8_t f32_to_e2m1(float f) { return encode_satfinite(f, kE2M1, 3, false); }
float e2m1_to_f32(uint8_t nibble) { return kE2M1Values[nibble & 0xfu]; }

}  // namespace weft
