// Element access shared by the hand-written CPU kernels: f32 and bf16 tensors
// are read and written as f32 through these, so each kernel is written once as
// a template over the storage type. Internal to kernels/.
#pragma once

#include <bit>
#include <cstdint>

#include "weft/core/dtype.h"
#include "weft/core/error.h"
#include "weft/core/tensor.h"

namespace weft::kernels::detail {

struct BF16 {
  uint16_t bits;
};

inline float to_f32(float v) { return v; }
inline float to_f32(BF16 v) { return bf16_to_f32(v.bits); }
template <typename T>
T from_f32(float v);
template <>
inline float from_f32<float>(float v) {
  return v;
}
template <>
inline BF16 from_f32<BF16>(float v) {
  return BF16{f32_to_bf16(v)};
}

inline void check_float(const Tensor& t, const char* what) {
  WEFT_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::bf16, "{} must be f32 or bf16, got {}",
             what, dtype_name(t.dtype()));
}

template <typename T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw());
}

// Calls fn.template operator()<T>() with T = float or BF16 for the dtype.
template <typename Fn>
void dispatch_float(DType t, Fn&& fn) {
  if (t == DType::f32) {
    fn.template operator()<float>();
  } else if (t == DType::bf16) {
    fn.template operator()<BF16>();
  } else {
    WEFT_FAIL("expected an f32 or bf16 tensor, got {}", dtype_name(t));
  }
}

// The same for kernels written over raw pointers (bf16 as uint16_t words).
inline float load(const float* p, int64_t i) { return p[i]; }
inline float load(const uint16_t* p, int64_t i) { return bf16_to_f32(p[i]); }
inline void store(float* p, int64_t i, float v) { p[i] = v; }
inline void store(uint16_t* p, int64_t i, float v) { p[i] = f32_to_bf16(v); }

// Calls f with the tensor's elements as float* or uint16_t* (bf16).
template <typename F>
void with_floats(const Tensor& t, F&& f) {
  if (t.dtype() == DType::f32) {
    f(t.data<float>());
  } else {
    f(t.bf16_data());
  }
}

// e^x for x in [-87, 88], within 2 ulp; outside that range the result is
// meaningless, so callers clamp. glibc's expf is a call that the compiler
// cannot vectorize, and over a vocabulary row it would cost more than the
// rest of the loss together; this has no branch and no call, so the loops
// that call it vectorize. It is Cephes' expf: x = n·ln2 + r with |r| <= ln2/2
// (n rounded to nearest by adding 1.5·2^23, which leaves it in the low bits of
// t), a polynomial for e^r, and 2^n written into the exponent bits.
inline float exp_in_range(float x) {
  const float t = x * 1.44269504088896341f + 0x1.8p23f;
  const float n = t - 0x1.8p23f;
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;  // ln2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const uint32_t biased = std::bit_cast<uint32_t>(t) - std::bit_cast<uint32_t>(0x1.8p23f) + 127u;
  return p * std::bit_cast<float>(biased << 23);
}

}  // namespace weft::kernels::detail
