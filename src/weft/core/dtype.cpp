#include "weft/core/dtype.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "weft/core/error.h"

namespace weft {

int dtype_bits(DType t) {
  switch (t) {
    case DType::f32: return 32;
    case DType::i32: return 32;
    case DType::bf16: return 16;
    case DType::f16: return 16;
    case DType::e4m3: return 8;
    case DType::e5m2: return 8;
    case DType::e8m0: return 8;
    case DType::u8: return 8;
    case DType::e2m1: return 4;
    case DType::f64: return 64;
    case DType::i64: return 64;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::e4m3: return "fp8_e4m3";
    case DType::e5m2: return "fp8_e5m2";
    case DType::e8m0: return "e8m0";
    case DType::e2m1: return "fp4_e2m1";
    case DType::i32: return "i32";
    case DType::u8: return "u8";
    case DType::f64: return "f64";
    case DType::i64: return "i64";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  if (name == "f32" || name == "fp32" || name == "float32") return DType::f32;
  if (name == "bf16" || name == "bfloat16") return DType::bf16;
  if (name == "f16" || name == "fp16" || name == "float16") return DType::f16;
  if (name == "fp8_e4m3" || name == "e4m3") return DType::e4m3;
  if (name == "fp8_e5m2" || name == "e5m2") return DType::e5m2;
  if (name == "e8m0") return DType::e8m0;
  if (name == "fp4_e2m1" || name == "e2m1") return DType::e2m1;
  if (name == "i32" || name == "int32") return DType::i32;
  if (name == "u8" || name == "uint8") return DType::u8;
  if (name == "f64" || name == "float64") return DType::f64;
  if (name == "i64" || name == "int64") return DType::i64;
  WEFT_FAIL(
      "unknown dtype '{}': use f32, bf16, f16, fp8_e4m3, fp8_e5m2, e8m0, fp4_e2m1, i32, u8, f64 or "
      "i64",
      name);
}

int64_t dtype_storage_bytes(DType t, int64_t n) { return (n * dtype_bits(t) + 7) / 8; }

uint16_t f32_to_f16(float f) {
  uint32_t u = f32_to_bits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 2^16: Inf
  if (a < 0x38800000u) {
    // Result is subnormal (or zero): value / 2^-24, rounded to nearest even.
    if (a < 0x33000000u) return sign;  // below half the smallest subnormal
    uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(a >> 23);  // 14 + (113 - exp)
    uint32_t q = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t r = a - 0x38000000u;  // rebias exponent 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return static_cast<uint16_t>(sign | (r >> 13));
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  return bits_to_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

namespace {

float to_f32(const void* src, DType t, int64_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(src)[i];
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
    case DType::f16: return f16_to_f32(static_cast<const uint16_t*>(src)[i]);
    case DType::e4m3: return e4m3_to_f32(static_cast<const uint8_t*>(src)[i]);
    case DType::e5m2: return e5m2_to_f32(static_cast<const uint8_t*>(src)[i]);
    case DType::e8m0: return e8m0_to_f32(static_cast<const uint8_t*>(src)[i]);
    case DType::e2m1: {
      uint8_t byte = static_cast<const uint8_t*>(src)[i / 2];
      return e2m1_to_f32(i % 2 ? byte >> 4 : byte & 0xfu);
    }
    case DType::i32: return static_cast<float>(static_cast<const int32_t*>(src)[i]);
    case DType::u8: return static_cast<float>(static_cast<const uint8_t*>(src)[i]);
    case DType::f64: return static_cast<float>(static_cast<const double*>(src)[i]);
    case DType::i64: return static_cast<float>(static_cast<const int64_t*>(src)[i]);
  }
  return 0.0f;
}

// Truncates toward zero and saturates; NaN gives 0.
template <typename I>
I saturate_int(double f) {
  if (std::isnan(f)) return 0;
  const double v = std::trunc(f);
  // -2^(bits-1) and 2^(bits-1) (or 2^bits unsigned) are exact doubles; the
  // largest value of a 64-bit type is not.
  const double lo = static_cast<double>(std::numeric_limits<I>::min());
  const double past = std::ldexp(1.0, std::numeric_limits<I>::digits);
  if (v < lo) return std::numeric_limits<I>::min();
  if (v >= past) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

void from_f32(float f, void* dst, DType t, int64_t i) {
  switch (t) {
    case DType::f32: static_cast<float*>(dst)[i] = f; return;
    case DType::bf16: static_cast<uint16_t*>(dst)[i] = f32_to_bf16(f); return;
    case DType::f16: static_cast<uint16_t*>(dst)[i] = f32_to_f16(f); return;
    case DType::e4m3: static_cast<uint8_t*>(dst)[i] = f32_to_e4m3(f); return;
    case DType::e5m2: static_cast<uint8_t*>(dst)[i] = f32_to_e5m2(f); return;
    case DType::e8m0: static_cast<uint8_t*>(dst)[i] = f32_to_e8m0(f); return;
    case DType::e2m1: {
      uint8_t& byte = static_cast<uint8_t*>(dst)[i / 2];
      uint8_t nib = f32_to_e2m1(f);
      byte = i % 2 ? static_cast<uint8_t>((byte & 0x0fu) | (nib << 4))
                   : static_cast<uint8_t>((byte & 0xf0u) | nib);
      return;
    }
    case DType::i32: static_cast<int32_t*>(dst)[i] = saturate_int<int32_t>(f); return;
    case DType::u8: static_cast<uint8_t*>(dst)[i] = saturate_int<uint8_t>(f); return;
    case DType::f64: static_cast<double*>(dst)[i] = f; return;
    case DType::i64: static_cast<int64_t*>(dst)[i] = saturate_int<int64_t>(f); return;
  }
}

bool is_wide(DType t) { return t == DType::f64 || t == DType::i64; }

double to_f64(const void* src, DType t, int64_t i) {
  switch (t) {
    case DType::f64: return static_cast<const double*>(src)[i];
    case DType::i64: return static_cast<double>(static_cast<const int64_t*>(src)[i]);
    case DType::i32: return static_cast<const int32_t*>(src)[i];
    default: return to_f32(src, t, i);
  }
}

void from_f64(double v, void* dst, DType t, int64_t i) {
  switch (t) {
    case DType::f64: static_cast<double*>(dst)[i] = v; return;
    case DType::i64: static_cast<int64_t*>(dst)[i] = saturate_int<int64_t>(v); return;
    case DType::i32: static_cast<int32_t*>(dst)[i] = saturate_int<int32_t>(v); return;
    case DType::u8: static_cast<uint8_t*>(dst)[i] = saturate_int<uint8_t>(v); return;
    default: from_f32(static_cast<float>(v), dst, t, i);
  }
}

}  // namespace

void convert(const void* src, DType src_type, void* dst, DType dst_type, int64_t n) {
  if (src_type == DType::f32 && dst_type == DType::bf16) {
    const float* s = static_cast<const float*>(src);
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(s[i]);
    return;
  }
  if (src_type == DType::bf16 && dst_type == DType::f32) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    float* d = static_cast<float*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = bf16_to_f32(s[i]);
    return;
  }
  if (src_type == DType::i32 && dst_type == DType::i32) {
    std::copy_n(static_cast<const int32_t*>(src), n, static_cast<int32_t*>(dst));
    return;
  }
  if (src_type == DType::i64 && dst_type == DType::i64) {
    std::copy_n(static_cast<const int64_t*>(src), n, static_cast<int64_t*>(dst));
    return;
  }
  if (is_wide(src_type) || is_wide(dst_type)) {
    for (int64_t i = 0; i < n; ++i) from_f64(to_f64(src, src_type, i), dst, dst_type, i);
    return;
  }
  for (int64_t i = 0; i < n; ++i) from_f32(to_f32(src, src_type, i), dst, dst_type, i);
}

}  // namespace weft
