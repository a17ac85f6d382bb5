#include "weft/comm/reduce.h"

#include <algorithm>
#include <cstring>

#include "weft/core/error.h"

namespace weft::comm::detail {

namespace {

// Elements per block: the f32 accumulator stays in L1.
constexpr int64_t kBlock = 2048;

inline float max_nan(float acc, float x) { return (x > acc || x != x) ? x : acc; }

struct F32 {
  using T = float;
  static float load(const T* p, int64_t i) { return p[i]; }
  static void store(T* p, int64_t i, float v) { p[i] = v; }
};

struct BF16 {
  using T = uint16_t;
  static float load(const T* p, int64_t i) { return bf16_to_f32(p[i]); }
  static void store(T* p, int64_t i, float v) { p[i] = f32_to_bf16(v); }
};

template <typename E>
void reduce_typed(ReduceOp op, void* out_raw, std::span<const void* const> inputs, int64_t count,
                  int divisor) {
  using T = typename E::T;
  T* out = static_cast<T*>(out_raw);
  const float inv = 1.0f / static_cast<float>(divisor);
  float acc[kBlock];
  for (int64_t b0 = 0; b0 < count; b0 += kBlock) {
    const int64_t m = std::min(kBlock, count - b0);
    const T* first = static_cast<const T*>(inputs[0]) + b0;
    for (int64_t i = 0; i < m; ++i) acc[i] = E::load(first, i);
    for (size_t k = 1; k < inputs.size(); ++k) {
      const T* in = static_cast<const T*>(inputs[k]) + b0;
      if (op == ReduceOp::max) {
        for (int64_t i = 0; i < m; ++i) acc[i] = max_nan(acc[i], E::load(in, i));
      } else {
        for (int64_t i = 0; i < m; ++i) acc[i] += E::load(in, i);
      }
    }
    if (op == ReduceOp::avg) {
      // Division, not a multiply by 1/n, so avg of equal values is exact.
      if (divisor == 1 || divisor == 2 || divisor == 4 || divisor == 8) {
        for (int64_t i = 0; i < m; ++i) acc[i] *= inv;
      } else {
        const float d = static_cast<float>(divisor);
        for (int64_t i = 0; i < m; ++i) acc[i] /= d;
      }
    }
    T* dst = out + b0;
    for (int64_t i = 0; i < m; ++i) E::store(dst, i, acc[i]);
  }
}

}  // namespace

void reduce_buffers(DType dtype, ReduceOp op, void* out, std::span<const void* const> inputs,
                    int64_t count, int divisor) {
  WEFT_CHECK(!inputs.empty(), "internal: reduction over no inputs");
  if (dtype == DType::f32) return reduce_typed<F32>(op, out, inputs, count, divisor);
  if (dtype == DType::bf16) return reduce_typed<BF16>(op, out, inputs, count, divisor);
  WEFT_FAIL("reductions need f32 or bf16 tensors, got {}", dtype_name(dtype));
}

void divide_buffer(DType dtype, void* data, int64_t count, int divisor) {
  const void* one[] = {data};
  reduce_buffers(dtype, ReduceOp::avg, data, one, count, divisor);
}

}  // namespace weft::comm::detail
