#include "weft/kernels/cpu/attention_rows.h"

#include "weft/core/dtype.h"
#include "weft/kernels/cpu/clones.h"

namespace weft::kernels::cpu::attention_rows {

// The row loops of the softmax and its gradient, cloned per instruction set
// (cpu/clones.h): they were ~40% of the kernels' time as SSE2 code.

WEFT_ROW_CLONES float exp_row_online(float* s, int64_t n, float* max) {
  float m = *max;
  // A select, not std::max, so that GCC vectorizes the reduction.
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; ++j) m = s[j] > m ? s[j] : m;
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    s[j] = exp_nonpositive(s[j] - m);
    sum += s[j];
  }
  *max = m;
  return sum;
}

WEFT_ROW_CLONES void exp_row(float* p, int64_t n, float shift) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) p[j] = exp_nonpositive(p[j] - shift);
}

WEFT_ROW_CLONES void scale_row(float* x, int64_t n, float a) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) x[j] *= a;
}

WEFT_ROW_CLONES void bf16_row(const float* src, uint16_t* dst, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) dst[j] = f32_to_bf16(src[j]);
}

WEFT_ROW_CLONES void scaled_row(const float* src, float a, float* dst, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) dst[j] = src[j] * a;
}
WEFT_ROW_CLONES void scaled_row(const float* src, float a, uint16_t* dst, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) dst[j] = f32_to_bf16(src[j] * a);
}

WEFT_ROW_CLONES float dot_row(const float* a, const float* b, int64_t n) {
  float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
  for (int64_t j = 0; j < n; ++j) dot += a[j] * b[j];
  return dot;
}
WEFT_ROW_CLONES float dot_row(const uint16_t* a, const uint16_t* b, int64_t n) {
  float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
  for (int64_t j = 0; j < n; ++j) dot += bf16_to_f32(a[j]) * bf16_to_f32(b[j]);
  return dot;
}

WEFT_ROW_CLONES void softmax_grad_row(const float* p, float* g, int64_t n, float delta) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) g[j] = p[j] * (g[j] - delta);
}
WEFT_ROW_CLONES void softmax_grad_row(const float* p, const float* g, uint16_t* dst, int64_t n,
                                      float delta) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) dst[j] = f32_to_bf16(p[j] * (g[j] - delta));
}

}  // namespace weft::kernels::cpu::attention_rows
