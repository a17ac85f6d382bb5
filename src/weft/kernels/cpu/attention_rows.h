// The row loops of the fused attention's softmax and of its gradient, over
// f32 rows of one block (kernels/cpu/attention.cpp). Internal to kernels/cpu.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#include "weft/kernels/elementwise.h"

namespace weft::kernels::cpu::attention_rows {

// e^x for x <= 0 (detail::exp_in_range after a clamp). std::exp does not vectorize
// without -ffast-math, and the softmax spends most of its time here.
inline float exp_nonpositive(float x) {
  // max(x, -87): below -87 e^x is no longer a normal float, and the softmax
  // divides by a sum >= 1, so e^-87 instead of 0 changes nothing visible. It is
  // an unsigned min of the bit patterns (a negative float's pattern grows with
  // its magnitude; -inf's is the largest) because GCC does not vectorize a
  // float compare under the default -ftrapping-math.
  return detail::exp_in_range(
      std::bit_cast<float>(std::min(std::bit_cast<uint32_t>(x), std::bit_cast<uint32_t>(-87.0f))));
}

// s[0..n) -> e^(s - max) with *max raised to the largest s first; returns
// the sum of the exponentials.
float exp_row_online(float* s, int64_t n, float* max);
// p[0..n) -> e^(p - shift) (shift at least every p)
void exp_row(float* p, int64_t n, float shift);
// x[0..n) *= a
void scale_row(float* x, int64_t n, float a);
// dst[0..n) = bf16(src)
void bf16_row(const float* src, uint16_t* dst, int64_t n);
// dst[0..n) = src·a, in f32 or rounded to bf16.
void scaled_row(const float* src, float a, float* dst, int64_t n);
void scaled_row(const float* src, float a, uint16_t* dst, int64_t n);
// Σ a·b over n elements (f32, or bf16 widened).
float dot_row(const float* a, const float* b, int64_t n);
float dot_row(const uint16_t* a, const uint16_t* b, int64_t n);
// The softmax gradient: g[0..n) -> p·(g - delta), or into bf16 dst.
void softmax_grad_row(const float* p, float* g, int64_t n, float delta);
void softmax_grad_row(const float* p, const float* g, uint16_t* dst, int64_t n, float delta);

}  // namespace weft::kernels::cpu::attention_rows
