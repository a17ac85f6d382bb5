// Element types and conversions between them.
//
// Floating formats follow their specifications: bf16 and f16 are IEEE-style
// with infinities; fp8 e4m3 is the OCP "FN" variant (no infinities, one NaN
// pattern per sign, max 448); fp8 e5m2 is IEEE-style (max 57344); e8m0 is the
// OCP MX block-scale format (2^(e-127), no sign, no zero, 0xFF is NaN); fp4
// e2m1 holds {0, 0.5, 1, 1.5, 2, 3, 4, 6} with a sign and no Inf/NaN, packed two
// to a byte, the element with the lower index in the low nibble.
//
// Conversions from f32 round to nearest, ties to even. What happens out of
// range is stated per format next to its function below.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace weft {

// f64 and i64 are for exact host-side arithmetic (norms, counts, reductions
// of them); kernels compute in f32 and bf16. New types go at the end, so
// that the values of the others stay as they are.
enum class DType : uint8_t { f32, bf16, f16, e4m3, e5m2, e8m0, e2m1, i32, u8, f64, i64 };

// Size of one element in bits (4 for e2m1, which is packed two per byte).
int dtype_bits(DType t);
// "f32", "bf16", "f16", "fp8_e4m3", "fp8_e5m2", "e8m0", "fp4_e2m1", "i32", "u8",
// "f64", "i64".
std::string_view dtype_name(DType t);
// Inverse of dtype_name; also accepts "e4m3", "e5m2", "e2m1", "fp32", "float32",
// "bfloat16", "float64", "int64". Throws weft::Error naming the accepted spellings.
DType parse_dtype(std::string_view name);
// Bytes needed to store n elements.
int64_t dtype_storage_bytes(DType t, int64_t n);

inline float bits_to_f32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline uint32_t f32_to_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// bf16: round to nearest even; overflow rounds to Inf; NaN stays NaN (quiet).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_f32(uint16_t h) { return bits_to_f32(static_cast<uint32_t>(h) << 16); }
// Rounds f to the nearest bf16 value and returns it as f32.
inline float round_to_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

// f16: IEEE binary16; overflow rounds to Inf; subnormals kept; NaN stays NaN.
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

// fp8 e4m3 (OCP FN): finite values beyond 448, and +-Inf, saturate to +-448
// (CUDA's satfinite rule, so CPU and GPU quantize alike); NaN -> NaN (0x7f/0xff).
uint8_t f32_to_e4m3(float f);
float e4m3_to_f32(uint8_t v);

// fp8 e5m2: finite values beyond 57344, and +-Inf, saturate to +-57344 (CUDA's
// satfinite rule, as for e4m3); NaN -> NaN (0x7f/0xff). 0x7c/0xfc still decode
// to +-Inf.
uint8_t f32_to_e5m2(float f);
float e5m2_to_f32(uint8_t v);

// e8m0 (unsigned power of two, 2^-127 .. 2^127): rounds to the nearest power of
// two (so 1.5 * 2^k is the tie), ties to the even exponent field; values beyond
// 2^127 saturate to 2^127; +-0 and values below 2^-127 give 2^-127 (0x00);
// negative, NaN and Inf -> NaN (0xff).
uint8_t f32_to_e8m0(float f);
float e8m0_to_f32(uint8_t v);

// fp4 e2m1 (one nibble, low 4 bits): beyond +-6 saturates to +-6, +-Inf to +-6;
// NaN -> +6 (the format has no NaN; documented choice).
uint8_t f32_to_e2m1(float f);
float e2m1_to_f32(uint8_t nibble);

// Converts n elements. Either side may be any floating type (via f32); i32 and
// u8 convert by value (floats truncate toward zero, saturating). Conversions
// from or to f64 and i64 go through f64, so f64, i64 and i32 values keep
// every bit a double holds (i64 beyond 2^53 rounds, except i64 -> i64). e2m1 buffers
// are packed, so n counts elements, not bytes.
void convert(const void* src, DType src_type, void* dst, DType dst_type, int64_t n);

}  // namespace weft
