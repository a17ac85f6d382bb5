// Conversions between f32 and the narrow floating formats, checked against an
// fp64 reference built here from the format's fields, exhaustively where the
// format is small enough (all of them are) and by brute force for rounding.
#include "weft/core/dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "weft/core/error.h"

namespace weft {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kMaxF32 = std::numeric_limits<float>::max();

float next_up(float x) { return std::nextafter(x, kInf); }
float next_down(float x) { return std::nextafter(x, -kInf); }

// How a format spends its all-ones exponent field.
enum class Specials {
  ieee,  // Inf (mantissa 0) and NaN (otherwise): bf16, f16, e5m2
  fn,    // only S.1111.111 is NaN: e4m3
  none,  // every pattern is finite: e2m1
  e8m0,  // unsigned powers of two, 0xff is NaN
};

// A format as the tests see it. A code is a bit pattern: sign | magnitude, and
// magnitudes 0..max_code are the finite non-negative values in increasing order.
struct Codec {
  const char* name;
  int exp_bits;
  int man_bits;
  int bias;
  Specials specials;
  uint32_t max_code;
  bool saturates;  // past max (Inf included) gives max; otherwise IEEE rounding to Inf
  uint32_t (*encode)(float);
  float (*decode)(uint32_t);

  bool is_signed() const { return specials != Specials::e8m0; }
  uint32_t sign_mask() const { return is_signed() ? 1u << (exp_bits + man_bits) : 0u; }
  uint32_t count() const { return 1u << (exp_bits + man_bits + (is_signed() ? 1 : 0)); }
};

// A Codec for the format whose codes are stored as T.
template <typename T, T (*encode)(float), float (*decode)(T)>
Codec make_codec(const char* name, int exp_bits, int man_bits, int bias, Specials specials,
                 uint32_t max_code, bool saturates) {
  Codec c;
  c.name = name;
  c.exp_bits = exp_bits;
  c.man_bits = man_bits;
  c.bias = bias;
  c.specials = specials;
  c.max_code = max_code;
  c.saturates = saturates;
  c.encode = [](float f) -> uint32_t { return encode(f); };
  c.decode = [](uint32_t code) { return decode(static_cast<T>(code)); };
  return c;
}

const Codec kBF16 = make_codec<uint16_t, f32_to_bf16, bf16_to_f32>("bf16", 8, 7, 127,
                                                                   Specials::ieee, 0x7f7f, false);
const Codec kF16 =
    make_codec<uint16_t, f32_to_f16, f16_to_f32>("f16", 5, 10, 15, Specials::ieee, 0x7bff, false);
const Codec kE4M3 =
    make_codec<uint8_t, f32_to_e4m3, e4m3_to_f32>("e4m3", 4, 3, 7, Specials::fn, 0x7e, true);
const Codec kE5M2 =
    make_codec<uint8_t, f32_to_e5m2, e5m2_to_f32>("e5m2", 5, 2, 15, Specials::ieee, 0x7b, true);
const Codec kE8M0 =
    make_codec<uint8_t, f32_to_e8m0, e8m0_to_f32>("e8m0", 8, 0, 127, Specials::e8m0, 0xfe, true);
const Codec kE2M1 =
    make_codec<uint8_t, f32_to_e2m1, e2m1_to_f32>("e2m1", 2, 1, 1, Specials::none, 0x7, true);

const Codec* const kCodecs[] = {&kBF16, &kF16, &kE4M3, &kE5M2, &kE8M0, &kE2M1};

// fp64 value of a code, from the format's definition; NaN for NaN codes.
double reference_value(const Codec& c, uint32_t code) {
  const bool negative = (code & c.sign_mask()) != 0;
  const int e = static_cast<int>(code >> c.man_bits) & ((1 << c.exp_bits) - 1);
  const int m = static_cast<int>(code) & ((1 << c.man_bits) - 1);
  const int all_ones = (1 << c.exp_bits) - 1;
  switch (c.specials) {
    case Specials::ieee:
      if (e == all_ones) return m != 0 ? std::nan("") : negative ? -HUGE_VAL : HUGE_VAL;
      break;
    case Specials::fn:
      if (e == all_ones && m == (1 << c.man_bits) - 1) return std::nan("");
      break;
    case Specials::e8m0: return code == 0xff ? std::nan("") : std::ldexp(1.0, e - c.bias);
    case Specials::none: break;
  }
  const double magnitude = e == 0 ? std::ldexp(m, 1 - c.bias - c.man_bits)
                                  : std::ldexp((1 << c.man_bits) + m, e - c.bias - c.man_bits);
  return negative ? -magnitude : magnitude;
}

std::string hex(uint32_t code) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", code);
  return buf;
}

TEST(DTypeNames, NamesRoundTripAndAliasesParse) {
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::e4m3, DType::e5m2, DType::e8m0,
                  DType::e2m1, DType::i32, DType::u8, DType::f64, DType::i64}) {
    EXPECT_EQ(parse_dtype(dtype_name(t)), t) << dtype_name(t);
  }
  EXPECT_EQ(parse_dtype("float64"), DType::f64);
  EXPECT_EQ(parse_dtype("int64"), DType::i64);
  EXPECT_EQ(parse_dtype("fp32"), DType::f32);
  EXPECT_EQ(parse_dtype("float32"), DType::f32);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_dtype("e4m3"), DType::e4m3);
  EXPECT_EQ(parse_dtype("e5m2"), DType::e5m2);
  EXPECT_EQ(parse_dtype("e2m1"), DType::e2m1);
}

TEST(DTypeNames, UnknownNameThrowsListingTheSpellings) {
  for (const char* bad : {"fp64", "", "e4m3fnuz", "int8"}) {
    try {
      parse_dtype(bad);
      ADD_FAILURE() << "parse_dtype(\"" << bad << "\") did not throw";
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(std::string("'") + bad + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("fp8_e4m3"), std::string::npos) << msg;
      EXPECT_NE(msg.find("fp4_e2m1"), std::string::npos) << msg;
    }
  }
}

TEST(DTypeNames, BitsAndStorage) {
  EXPECT_EQ(dtype_bits(DType::f32), 32);
  EXPECT_EQ(dtype_bits(DType::bf16), 16);
  EXPECT_EQ(dtype_bits(DType::e4m3), 8);
  EXPECT_EQ(dtype_bits(DType::e8m0), 8);
  EXPECT_EQ(dtype_bits(DType::e2m1), 4);
  EXPECT_EQ(dtype_storage_bytes(DType::e2m1, 0), 0);
  EXPECT_EQ(dtype_storage_bytes(DType::e2m1, 1), 1);
  EXPECT_EQ(dtype_storage_bytes(DType::e2m1, 5), 3);
  EXPECT_EQ(dtype_storage_bytes(DType::f16, 5), 10);
  EXPECT_EQ(dtype_storage_bytes(DType::i32, 3), 12);
}

// --- Properties of every format, over every code ------------------------------

TEST(DTypeCodec, EveryCodeDecodesToItsFieldValue) {
  for (const Codec* c : kCodecs) {
    for (uint32_t code = 0; code < c->count(); ++code) {
      const float got = c->decode(code);
      const double want = reference_value(*c, code);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << c->name << " " << hex(code) << " -> " << got;
      } else {
        EXPECT_EQ(static_cast<double>(got), want) << c->name << " " << hex(code);
        EXPECT_EQ(std::signbit(got), std::signbit(want)) << c->name << " " << hex(code);
      }
    }
  }
}

TEST(DTypeCodec, FiniteMagnitudesIncreaseWithCode) {
  for (const Codec* c : kCodecs) {
    for (uint32_t code = 0; code < c->max_code; ++code) {
      EXPECT_LT(c->decode(code), c->decode(code + 1)) << c->name << " " << hex(code);
    }
  }
}

TEST(DTypeCodec, EveryCodeRoundTrips) {
  for (const Codec* c : kCodecs) {
    for (uint32_t code = 0; code < c->count(); ++code) {
      const float v = c->decode(code);
      const uint32_t back = c->encode(v);
      if (std::isnan(v)) {
        EXPECT_TRUE(std::isnan(c->decode(back))) << c->name << " " << hex(code);
      } else if (std::isinf(v) && c->saturates) {
        EXPECT_EQ(back, (code & c->sign_mask()) | c->max_code) << c->name << " " << hex(code);
      } else {
        EXPECT_EQ(back, code) << c->name << " " << hex(code) << " = " << v;
      }
    }
  }
}

// Every midpoint between neighbouring finite values (subnormal, normal, across
// binades) goes to the even code, and the floats on either side of it go to
// the nearer neighbour.
TEST(DTypeCodec, MidpointsRoundToEvenAndNeighboursToNearest) {
  for (const Codec* c : kCodecs) {
    for (uint32_t code = 0; code < c->max_code; ++code) {
      const double lo = c->decode(code);
      const double hi = c->decode(code + 1);
      const float mid = static_cast<float>((lo + hi) / 2);
      ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2) << c->name << " midpoint not exact";
      const uint32_t even = code % 2 == 0 ? code : code + 1;
      for (uint32_t sign : {0u, c->sign_mask()}) {
        const float s = sign ? -1.0f : 1.0f;
        EXPECT_EQ(c->encode(s * mid), sign | even) << c->name << " tie " << mid;
        EXPECT_EQ(c->encode(s * next_down(mid)), sign | code) << c->name << " below " << mid;
        EXPECT_EQ(c->encode(s * next_up(mid)), sign | (code + 1)) << c->name << " above " << mid;
      }
    }
  }
}

TEST(DTypeCodec, BeyondMaxSaturatesOrRoundsToInf) {
  for (const Codec* c : kCodecs) {
    const float max = c->decode(c->max_code);
    const float ulp = max - c->decode(c->max_code - 1);
    // The first value of the binade above max, were there one.
    const float next_binade = max + ulp;
    const float mid = max + ulp / 2;
    for (uint32_t sign : {0u, c->sign_mask()}) {
      const float s = sign ? -1.0f : 1.0f;
      const uint32_t top = sign | c->max_code;
      EXPECT_EQ(c->encode(s * next_down(mid)), top) << c->name;
      if (c->saturates) {
        for (float big : {next_up(max), mid, next_up(mid), next_binade, kMaxF32}) {
          EXPECT_EQ(c->encode(s * big), top) << c->name << " " << big;
        }
        // e8m0 has no Inf to saturate from: Inf is out of its domain, like negatives.
        EXPECT_EQ(c->encode(s * kInf), c->specials == Specials::e8m0 ? 0xffu : top) << c->name;
      } else {
        const uint32_t inf = sign | (c->max_code + 1);  // IEEE: Inf follows max
        EXPECT_TRUE(std::isinf(c->decode(inf)));
        for (float big : {mid, next_up(mid), next_binade, kMaxF32, kInf}) {
          EXPECT_EQ(c->encode(s * big), inf) << c->name << " " << big;
        }
      }
    }
  }
}

// Nearest finite code to a >= 0 by scanning every value; IEEE formats that
// overflow to Inf get Inf as a candidate at the start of the next binade
// (which makes max + ulp/2, a tie, go to Inf: its code is even).
uint32_t brute_force_nearest(const std::vector<double>& values, double a) {
  uint32_t best = 0;
  double best_dist = HUGE_VAL;
  for (uint32_t code = 0; code < values.size(); ++code) {
    const double dist = std::fabs(values[code] - a);
    if (dist < best_dist || (dist == best_dist && code % 2 == 0)) {
      best = code;
      best_dist = dist;
    }
  }
  return best;
}

TEST(DTypeCodec, RandomFloatsRoundToTheNearestValue) {
  std::mt19937 rng(20240611);
  for (const Codec* c : kCodecs) {
    std::vector<double> values;
    for (uint32_t code = 0; code <= c->max_code; ++code) values.push_back(c->decode(code));
    if (!c->saturates) values.push_back(2 * values.back() - values[values.size() - 2]);
    // Exponents from below half the smallest value to beyond the largest.
    const int lo_exp = std::ilogb(values[c->is_signed() ? 1 : 0]) - 3;
    const int hi_exp = std::min(std::ilogb(values[c->max_code]) + 3, 127);
    std::uniform_int_distribution<int> exp_dist(lo_exp, hi_exp);
    std::uniform_int_distribution<uint32_t> bits_dist(0, 0x7fffffu);
    for (int i = 0; i < 3000; ++i) {
      uint32_t mantissa = bits_dist(rng);
      // Half of the samples keep only a few bits below the format's precision,
      // so that ties come up often.
      if (i % 2) mantissa &= ~((1u << (23 - c->man_bits - 2)) - 1);
      const float a =
          std::ldexp(1.0f + std::ldexp(static_cast<float>(mantissa), -23), exp_dist(rng));
      const bool negative = c->is_signed() && (rng() & 1);
      const uint32_t want = (negative ? c->sign_mask() : 0u) | brute_force_nearest(values, a);
      EXPECT_EQ(c->encode(negative ? -a : a), want) << c->name << " " << (negative ? -a : a);
    }
  }
}

// --- Format by format: the documented edge values ------------------------------

TEST(DTypeBF16, EdgeValues) {
  EXPECT_EQ(f32_to_bf16(0x1.fep127f), 0x7f7f);  // max normal
  EXPECT_EQ(f32_to_bf16(0x1p-126f), 0x0080);    // min normal
  EXPECT_EQ(f32_to_bf16(0x1p-133f), 0x0001);    // min subnormal
  EXPECT_EQ(f32_to_bf16(0x1p-134f), 0x0000);    // half of it: tie to zero
  EXPECT_EQ(f32_to_bf16(next_up(0x1p-134f)), 0x0001);
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);  // tie, down to even
  EXPECT_EQ(f32_to_bf16(1.0f + 0x3p-8f), 0x3f82);  // tie, up to even
  EXPECT_EQ(f32_to_bf16(2.0f - 0x1p-8f), 0x4000);  // tie, up into the next binade
  EXPECT_EQ(f32_to_bf16(kMaxF32), 0x7f80);         // overflow -> Inf
  EXPECT_EQ(f32_to_bf16(0x1.ffp127f), 0x7f80);     // max + ulp/2 is a tie -> Inf
  EXPECT_EQ(f32_to_bf16(next_down(0x1.ffp127f)), 0x7f7f);
  EXPECT_EQ(f32_to_bf16(kInf), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-kInf), 0xff80);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_TRUE(std::signbit(bf16_to_f32(0x8000)));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(kNaN))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(-kNaN))));
  // A NaN whose payload lies only in the low 16 bits must not become Inf.
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(bits_to_f32(0x7f800001u)))));
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0xff800001u)) & 0xffc0u, 0xffc0u);  // quiet, sign kept
  EXPECT_EQ(round_to_bf16(1.0f + 0x1p-9f), 1.0f);
}

TEST(DTypeF16, EdgeValues) {
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);  // max normal
  EXPECT_EQ(f32_to_f16(0x1p-14f), 0x0400);  // min normal
  EXPECT_EQ(f32_to_f16(0x1p-24f), 0x0001);  // min subnormal
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);  // half of it: tie to zero
  EXPECT_EQ(f32_to_f16(next_up(0x1p-25f)), 0x0001);
  EXPECT_EQ(f32_to_f16(0x3p-25f), 0x0002);         // subnormal tie, up to even
  EXPECT_EQ(f32_to_f16(0x5p-25f), 0x0002);         // subnormal tie, down to even
  EXPECT_EQ(f32_to_f16(0x7ffp-25f), 0x0400);       // tie from subnormal to min normal
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3c00);  // tie, down to even
  EXPECT_EQ(f32_to_f16(1.0f + 0x3p-11f), 0x3c02);  // tie, up to even
  EXPECT_EQ(f32_to_f16(2.0f - 0x1p-11f), 0x4000);  // tie, up into the next binade
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);         // max + ulp/2 is a tie -> Inf
  EXPECT_EQ(f32_to_f16(next_down(65520.0f)), 0x7bff);
  EXPECT_EQ(f32_to_f16(1e9f), 0x7c00);
  EXPECT_EQ(f32_to_f16(kInf), 0x7c00);
  EXPECT_EQ(f32_to_f16(-kInf), 0xfc00);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(-1e-30f), 0x8000);  // underflow keeps the sign
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(kNaN))));
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(bits_to_f32(0x7f800001u)))));
  EXPECT_EQ(f32_to_f16(-kNaN) & 0xfe00u, 0xfe00u);  // quiet, sign kept
}

TEST(DTypeE4M3, EdgeValues) {
  EXPECT_EQ(f32_to_e4m3(448.0f), 0x7e);    // max normal
  EXPECT_EQ(f32_to_e4m3(0x1p-6f), 0x08);   // min normal
  EXPECT_EQ(f32_to_e4m3(0x1p-9f), 0x01);   // min subnormal
  EXPECT_EQ(f32_to_e4m3(0x1p-10f), 0x00);  // half of it: tie to zero
  EXPECT_EQ(f32_to_e4m3(next_up(0x1p-10f)), 0x01);
  EXPECT_EQ(f32_to_e4m3(0x3p-10f), 0x02);  // subnormal tie, up to even
  EXPECT_EQ(f32_to_e4m3(0x5p-10f), 0x02);  // subnormal tie, down to even
  EXPECT_EQ(f32_to_e4m3(0xfp-10f), 0x08);  // tie from subnormal to min normal
  EXPECT_EQ(f32_to_e4m3(1.0625f), 0x38);   // tie between 1 and 1.125: down
  EXPECT_EQ(f32_to_e4m3(1.1875f), 0x3a);   // tie between 1.125 and 1.25: up
  EXPECT_EQ(f32_to_e4m3(1.9375f), 0x40);   // tie, up into the next binade
  EXPECT_EQ(f32_to_e4m3(464.0f), 0x7e);    // max + ulp/2: saturates (never NaN)
  EXPECT_EQ(f32_to_e4m3(480.0f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(1e30f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(kInf), 0x7e);
  EXPECT_EQ(f32_to_e4m3(-kInf), 0xfe);
  EXPECT_EQ(f32_to_e4m3(-500.0f), 0xfe);
  EXPECT_EQ(f32_to_e4m3(kNaN), 0x7f);
  EXPECT_EQ(f32_to_e4m3(-kNaN), 0xff);
  EXPECT_EQ(f32_to_e4m3(-0.0f), 0x80);
  EXPECT_EQ(f32_to_e4m3(-1e-30f), 0x80);
  EXPECT_TRUE(std::signbit(e4m3_to_f32(0x80)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xff)));
  EXPECT_EQ(e4m3_to_f32(0x78), 256.0f);  // S.1111.000 is a number, not Inf
  EXPECT_EQ(e4m3_to_f32(0xfe), -448.0f);
}

TEST(DTypeE5M2, EdgeValues) {
  EXPECT_EQ(f32_to_e5m2(57344.0f), 0x7b);  // max normal
  EXPECT_EQ(f32_to_e5m2(0x1p-14f), 0x04);  // min normal
  EXPECT_EQ(f32_to_e5m2(0x1p-16f), 0x01);  // min subnormal
  EXPECT_EQ(f32_to_e5m2(0x1p-17f), 0x00);  // half of it: tie to zero
  EXPECT_EQ(f32_to_e5m2(next_up(0x1p-17f)), 0x01);
  EXPECT_EQ(f32_to_e5m2(0x3p-17f), 0x02);  // subnormal tie, up to even
  EXPECT_EQ(f32_to_e5m2(0x5p-17f), 0x02);  // subnormal tie, down to even
  EXPECT_EQ(f32_to_e5m2(0x7p-17f), 0x04);  // tie from subnormal to min normal
  EXPECT_EQ(f32_to_e5m2(1.125f), 0x3c);    // tie between 1 and 1.25: down
  EXPECT_EQ(f32_to_e5m2(1.375f), 0x3e);    // tie between 1.25 and 1.5: up
  EXPECT_EQ(f32_to_e5m2(1.875f), 0x40);    // tie, up into the next binade
  EXPECT_EQ(f32_to_e5m2(61440.0f), 0x7b);  // max + ulp/2: saturates
  EXPECT_EQ(f32_to_e5m2(1e30f), 0x7b);
  EXPECT_EQ(f32_to_e5m2(kInf), 0x7b);  // satfinite: Inf saturates too
  EXPECT_EQ(f32_to_e5m2(-kInf), 0xfb);
  EXPECT_EQ(f32_to_e5m2(kNaN), 0x7f);
  EXPECT_EQ(f32_to_e5m2(-kNaN), 0xff);
  EXPECT_EQ(f32_to_e5m2(-0.0f), 0x80);
  EXPECT_EQ(f32_to_e5m2(-1e-30f), 0x80);
  EXPECT_TRUE(std::signbit(e5m2_to_f32(0x80)));
  EXPECT_EQ(e5m2_to_f32(0x7c), kInf);
  EXPECT_EQ(e5m2_to_f32(0xfc), -kInf);
  for (uint8_t nan : {0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff}) {
    EXPECT_TRUE(std::isnan(e5m2_to_f32(nan))) << hex(nan);
  }
}

TEST(DTypeE8M0, EdgeValues) {
  EXPECT_EQ(f32_to_e8m0(1.0f), 127);
  EXPECT_EQ(f32_to_e8m0(0x1p127f), 0xfe);   // max
  EXPECT_EQ(f32_to_e8m0(0x1p-127f), 0x00);  // min (an f32 subnormal)
  EXPECT_EQ(f32_to_e8m0(0x1p-126f), 0x01);
  EXPECT_EQ(f32_to_e8m0(0x1p-128f), 0x00);  // below min: min
  EXPECT_EQ(f32_to_e8m0(0x1p-149f), 0x00);
  EXPECT_EQ(f32_to_e8m0(0.0f), 0x00);
  EXPECT_EQ(f32_to_e8m0(-0.0f), 0x00);
  EXPECT_EQ(f32_to_e8m0(1.5f), 128);  // tie between fields 127, 128: even
  EXPECT_EQ(f32_to_e8m0(next_down(1.5f)), 127);
  EXPECT_EQ(f32_to_e8m0(3.0f), 128);  // tie between fields 128, 129: even
  EXPECT_EQ(f32_to_e8m0(next_up(3.0f)), 129);
  EXPECT_EQ(f32_to_e8m0(0x3p-128f), 0x00);   // subnormal tie between 0x00, 0x01
  EXPECT_EQ(f32_to_e8m0(0x1.8p127f), 0xfe);  // tie with the (absent) 2^128
  EXPECT_EQ(f32_to_e8m0(kMaxF32), 0xfe);     // saturates
  EXPECT_EQ(f32_to_e8m0(kInf), 0xff);
  EXPECT_EQ(f32_to_e8m0(-kInf), 0xff);
  EXPECT_EQ(f32_to_e8m0(kNaN), 0xff);
  EXPECT_EQ(f32_to_e8m0(-1.0f), 0xff);
  EXPECT_EQ(f32_to_e8m0(-1e-30f), 0xff);
  EXPECT_EQ(e8m0_to_f32(0x00), 0x1p-127f);
  EXPECT_EQ(e8m0_to_f32(127), 1.0f);
  EXPECT_EQ(e8m0_to_f32(0xfe), 0x1p127f);
  EXPECT_TRUE(std::isnan(e8m0_to_f32(0xff)));
}

TEST(DTypeE2M1, EdgeValues) {
  const float values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint8_t code = 0; code < 8; ++code) {
    EXPECT_EQ(e2m1_to_f32(code), values[code]);
    EXPECT_EQ(e2m1_to_f32(code | 0x8), -values[code]);
    EXPECT_EQ(f32_to_e2m1(values[code]), code);
    EXPECT_EQ(f32_to_e2m1(-values[code]), code | 0x8);
  }
  EXPECT_EQ(e2m1_to_f32(0x37), 6.0f);  // only the low nibble counts
  EXPECT_EQ(f32_to_e2m1(0.25f), 0x0);  // half the min subnormal: tie to zero
  EXPECT_EQ(f32_to_e2m1(next_up(0.25f)), 0x1);
  EXPECT_EQ(f32_to_e2m1(0.75f), 0x2);  // tie from subnormal to min normal
  EXPECT_EQ(f32_to_e2m1(1.25f), 0x2);  // tie, down to even
  EXPECT_EQ(f32_to_e2m1(1.75f), 0x4);  // tie, up into the next binade
  EXPECT_EQ(f32_to_e2m1(2.5f), 0x4);   // tie, down to even
  EXPECT_EQ(f32_to_e2m1(3.5f), 0x6);   // tie, up into the next binade
  EXPECT_EQ(f32_to_e2m1(5.0f), 0x6);   // tie between 4 and 6: down to even
  EXPECT_EQ(f32_to_e2m1(next_up(5.0f)), 0x7);
  EXPECT_EQ(f32_to_e2m1(7.0f), 0x7);  // saturates
  EXPECT_EQ(f32_to_e2m1(-1e30f), 0xf);
  EXPECT_EQ(f32_to_e2m1(kInf), 0x7);
  EXPECT_EQ(f32_to_e2m1(-kInf), 0xf);
  EXPECT_EQ(f32_to_e2m1(kNaN), 0x7);  // no NaN in the format: +6
  EXPECT_EQ(f32_to_e2m1(-kNaN), 0x7);
  EXPECT_EQ(f32_to_e2m1(-0.0f), 0x8);
  EXPECT_EQ(f32_to_e2m1(-0.1f), 0x8);
  EXPECT_TRUE(std::signbit(e2m1_to_f32(0x8)));
}

// --- Bulk convert() --------------------------------------------------------------

TEST(DTypeConvert, PacksE2M1LowNibbleFirst) {
  const float src[5] = {0.5f, -1.0f, 6.0f, 100.0f, -0.25f};
  uint8_t packed[3] = {0xff, 0xff, 0xff};
  convert(src, DType::f32, packed, DType::e2m1, 5);
  EXPECT_EQ(packed[0], 0xa1);  // element 0 (0x1) low, element 1 (0xa) high
  EXPECT_EQ(packed[1], 0x77);
  EXPECT_EQ(packed[2], 0xf8);  // -0.25 ties to -0; the unused high nibble is left alone

  float back[5];
  convert(packed, DType::e2m1, back, DType::f32, 5);
  const float want[5] = {0.5f, -1.0f, 6.0f, 6.0f, -0.0f};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(back[i], want[i]) << i;
    EXPECT_EQ(std::signbit(back[i]), std::signbit(want[i])) << i;
  }

  // Packed to packed, starting from an odd element count too.
  uint8_t copy[3] = {0, 0, 0};
  convert(packed, DType::e2m1, copy, DType::e2m1, 5);
  EXPECT_EQ(copy[0], 0xa1);
  EXPECT_EQ(copy[1], 0x77);
  EXPECT_EQ(copy[2], 0x08);
}

TEST(DTypeConvert, EveryFp8CodeSurvivesAConvertRoundTrip) {
  for (DType t : {DType::e4m3, DType::e8m0}) {
    std::vector<uint8_t> codes(256), back(256);
    for (int i = 0; i < 256; ++i) codes[i] = static_cast<uint8_t>(i);
    std::vector<float> f(256);
    convert(codes.data(), t, f.data(), DType::f32, 256);
    convert(f.data(), DType::f32, back.data(), t, 256);
    EXPECT_EQ(back, codes) << dtype_name(t);  // their NaNs are single patterns
  }
}

TEST(DTypeConvert, FloatsBetweenFormats) {
  const float src[4] = {1.0f, -2.5f, 1e6f, 0x1p-20f};
  uint16_t bf[4], h[4];
  convert(src, DType::f32, bf, DType::bf16, 4);
  convert(src, DType::f32, h, DType::f16, 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(bf[i], f32_to_bf16(src[i]));
    EXPECT_EQ(h[i], f32_to_f16(src[i]));
  }
  uint8_t e4[4], e5[4];
  convert(bf, DType::bf16, e4, DType::e4m3, 4);
  convert(h, DType::f16, e5, DType::e5m2, 4);
  EXPECT_EQ(e4[0], 0x38);
  EXPECT_EQ(e4[1], 0xc2);
  EXPECT_EQ(e4[2], 0x7e);  // saturated
  EXPECT_EQ(e5[2], 0x7b);  // f16 Inf, saturated
  float back[4];
  convert(e4, DType::e4m3, back, DType::f32, 4);
  EXPECT_EQ(back[1], -2.5f);
  convert(bf, DType::bf16, back, DType::f32, 4);
  EXPECT_EQ(back[0], 1.0f);
}

TEST(DTypeConvert, IntegersTruncateAndSaturate) {
  const float src[9] = {3e9f, -3e9f, 2.9f, -2.9f, kNaN, kInf, -kInf, 255.9f, -0.5f};
  int32_t i32[9];
  convert(src, DType::f32, i32, DType::i32, 9);
  const int32_t want_i32[9] = {INT32_MAX, INT32_MIN, 2, -2, 0, INT32_MAX, INT32_MIN, 255, 0};
  uint8_t u8[9];
  convert(src, DType::f32, u8, DType::u8, 9);
  const uint8_t want_u8[9] = {255, 0, 2, 0, 0, 255, 0, 255, 0};
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(i32[i], want_i32[i]) << src[i];
    EXPECT_EQ(u8[i], want_u8[i]) << src[i];
  }

  const int32_t ints[4] = {-1, 256, 7, INT32_MAX};
  uint8_t narrow[4];
  convert(ints, DType::i32, narrow, DType::u8, 4);
  EXPECT_EQ(narrow[0], 0);
  EXPECT_EQ(narrow[1], 255);
  EXPECT_EQ(narrow[2], 7);
  EXPECT_EQ(narrow[3], 255);
  int32_t same[4];
  convert(ints, DType::i32, same, DType::i32, 4);  // exact, even beyond 2^24
  EXPECT_EQ(same[3], INT32_MAX);
  float f[4];
  convert(narrow, DType::u8, f, DType::f32, 4);
  EXPECT_EQ(f[1], 255.0f);
}

// f64 and i64 convert through f64: f64, i32 and i64 within 2^53 keep every
// bit, i64 to i64 keeps all 64, floats truncate toward zero and saturate.
TEST(DTypeConvert, WideTypesKeepTheirBits) {
  EXPECT_EQ(dtype_bits(DType::f64), 64);
  EXPECT_EQ(dtype_bits(DType::i64), 64);
  const double d[3] = {1.0 + std::ldexp(1.0, -40), -3.5, 1e300};
  double d_back[3];
  convert(d, DType::f64, d_back, DType::f64, 3);
  const int64_t big[3] = {(int64_t{1} << 60) + 1, -7, INT64_MAX};
  int64_t big_back[3];
  convert(big, DType::i64, big_back, DType::i64, 3);
  const int32_t small[3] = {INT32_MIN, 5, INT32_MAX};
  int64_t widened[3];
  convert(small, DType::i32, widened, DType::i64, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(d_back[i], d[i]);
    EXPECT_EQ(big_back[i], big[i]);
    EXPECT_EQ(widened[i], small[i]);
  }
  const double f[6] = {2.9, -2.9, 1e30, -1e30, kNaN, 9007199254740993.0};
  int64_t t[6];
  convert(f, DType::f64, t, DType::i64, 6);
  const int64_t want[6] = {2, -2, INT64_MAX, INT64_MIN, 0, int64_t{1} << 53};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(t[i], want[i]) << f[i];
  const float to_wide[2] = {0.1f, -kInf};
  double wide[2];
  convert(to_wide, DType::f32, wide, DType::f64, 2);
  EXPECT_EQ(wide[0], static_cast<double>(0.1f));
  EXPECT_EQ(wide[1], -std::numeric_limits<double>::infinity());
  float narrowed[1];
  convert(d, DType::f64, narrowed, DType::f32, 1);
  EXPECT_EQ(narrowed[0], 1.0f);
}

}  // namespace
}  // namespace weft
