#include "weft/comm/reduce.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <vector>

#include "weft/core/error.h"

namespace weft::comm::detail {

namespace {

// Elements per block: the f32 accumulator of three or more inputs stays in L1.
constexpr int64_t kBlock = 2048;

// The element formats, converted with integer operations only so that every
// loop below vectorizes: bf16 -> f32 is a shift, f32 -> bf16 rounds to nearest
// even and keeps NaN (quieted) exactly as f32_to_bf16 in core/dtype.h does.
struct F32 {
  using T = float;
  static float load(const T* p, int64_t i) { return p[i]; }
  static void store(T* p, int64_t i, float v) { p[i] = v; }
};

struct BF16 {
  using T = uint16_t;
  static float load(const T* p, int64_t i) {
    return std::bit_cast<float>(static_cast<uint32_t>(p[i]) << 16);
  }
  static void store(T* p, int64_t i, float v) {
    const uint32_t u = std::bit_cast<uint32_t>(v);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (u >> 16) | 0x0040u;
    p[i] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
};

// How an element combines with the running result: sum (and avg) or max,
// where max lets NaN win.
struct Add {
  static float apply(float acc, float x) { return acc + x; }
};
struct Max {
  static float apply(float acc, float x) { return (x > acc || x != x) ? x : acc; }
};

// What happens to the combined value before it is stored (avg scales).
// Division, not a multiply by 1/n, unless 1/n is exact, so that the average
// of equal values is exact.
struct Keep {
  static float apply(float v, float) { return v; }
};
struct Multiply {
  static float apply(float v, float factor) { return v * factor; }
};
struct Divide {
  static float apply(float v, float divisor) { return v / divisor; }
};

// out[i] = finish(in[0][i] op in[1][i] op ... op in[k-1][i]) for the m
// elements from `offset`: one fused pass for up to two inputs; beyond, an f32
// block accumulator takes the inputs in order. No calls and no branches inside
// the loops, so that each vectorizes.
template <typename E, typename Op, typename Finish>
[[gnu::always_inline]] inline void reduce_block(void* out, std::span<const void* const> inputs,
                                                int64_t offset, int64_t m, float factor) {
  using T = typename E::T;
  const auto input = [&](size_t j) { return static_cast<const T*>(inputs[j]) + offset; };
  const size_t k = inputs.size();
  T* dst = static_cast<T*>(out) + offset;
  const T* a = input(0);
  if (k == 1) {
    for (int64_t i = 0; i < m; ++i) E::store(dst, i, Finish::apply(E::load(a, i), factor));
    return;
  }
  const T* last = input(k - 1);
  if (k == 2) {
    for (int64_t i = 0; i < m; ++i) {
      E::store(dst, i, Finish::apply(Op::apply(E::load(a, i), E::load(last, i)), factor));
    }
    return;
  }
  float acc[kBlock];
  const T* b = input(1);
  for (int64_t i = 0; i < m; ++i) acc[i] = Op::apply(E::load(a, i), E::load(b, i));
  for (size_t j = 2; j + 1 < k; ++j) {
    const T* x = input(j);
    for (int64_t i = 0; i < m; ++i) acc[i] = Op::apply(acc[i], E::load(x, i));
  }
  for (int64_t i = 0; i < m; ++i) {
    E::store(dst, i, Finish::apply(Op::apply(acc[i], E::load(last, i)), factor));
  }
}

template <typename E, typename Op, typename Finish>
[[gnu::always_inline]] inline void reduce_loops(void* out, std::span<const void* const> inputs,
                                                int64_t count, float factor) {
  for (int64_t b0 = 0; b0 < count; b0 += kBlock) {
    reduce_block<E, Op, Finish>(out, inputs, b0, std::min(kBlock, count - b0), factor);
  }
}

template <typename E>
[[gnu::always_inline]] inline void reduce_typed(ReduceOp op, void* out,
                                                std::span<const void* const> inputs, int64_t count,
                                                int divisor) {
  if (op == ReduceOp::max) return reduce_loops<E, Max, Keep>(out, inputs, count, 0.0f);
  if (op == ReduceOp::sum) return reduce_loops<E, Add, Keep>(out, inputs, count, 0.0f);
  if (divisor == 1 || divisor == 2 || divisor == 4 || divisor == 8) {
    return reduce_loops<E, Add, Multiply>(out, inputs, count, 1.0f / static_cast<float>(divisor));
  }
  reduce_loops<E, Add, Divide>(out, inputs, count, static_cast<float>(divisor));
}

// The loops are compiled for AVX-512 and AVX2 besides the baseline x86-64
// the library is built for, and the processor picks one at load time: with
// SSE2 alone (no 32 -> 16-bit narrowing) the bf16 loops take about twice as
// long as with AVX-512.
#if defined(__x86_64__) && defined(__GNUC__)
#define WEFT_REDUCE_CLONES [[gnu::target_clones("avx512f", "avx2", "default")]]
#else
#define WEFT_REDUCE_CLONES
#endif

WEFT_REDUCE_CLONES
void reduce_f32(ReduceOp op, void* out, std::span<const void* const> inputs, int64_t count,
                int divisor) {
  reduce_typed<F32>(op, out, inputs, count, divisor);
}

WEFT_REDUCE_CLONES
void reduce_bf16(ReduceOp op, void* out, std::span<const void* const> inputs, int64_t count,
                 int divisor) {
  reduce_typed<BF16>(op, out, inputs, count, divisor);
}

}  // namespace

namespace {

// Below this a copy fits in the caches, where normal stores are faster and
// leave the data where the next reader finds it.
constexpr int64_t kStreamingBytes = int64_t{4} << 20;

#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("avx512f")]] void stream_copy(char* dst, const char* src, int64_t bytes) {
  const int64_t head = static_cast<int64_t>((64 - reinterpret_cast<uintptr_t>(dst) % 64) % 64);
  std::memcpy(dst, src, static_cast<size_t>(head));
  int64_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i), _mm512_loadu_si512(src + i));
  }
  _mm_sfence();
  std::memcpy(dst + i, src + i, static_cast<size_t>(bytes - i));
}

bool has_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}
#endif

}  // namespace

void reduce_buffers(DType dtype, ReduceOp op, void* out, std::span<const void* const> inputs,
                    int64_t count, int divisor) {
  WEFT_CHECK(!inputs.empty(), "internal: reduction over no inputs");
  WEFT_CHECK(dtype == DType::f32 || dtype == DType::bf16,
             "reductions need f32 or bf16 tensors, got {}", dtype_name(dtype));
  auto reduce = dtype == DType::f32 ? reduce_f32 : reduce_bf16;
  const int64_t elem = dtype_bits(dtype) / 8;
#if defined(__x86_64__) && defined(__GNUC__)
  // A large output is reduced block by block into a cache-resident buffer and
  // streamed out, as copy_buffer does: the same values, one memory pass less.
  constexpr size_t kMaxInputs = 16;
  // In place, streaming would evict lines just read from the same addresses.
  const bool aliased = std::find(inputs.begin(), inputs.end(), out) != inputs.end();
  if (!aliased && count * elem >= kStreamingBytes && inputs.size() <= kMaxInputs && has_avx512()) {
    constexpr int64_t kStreamBlock = 16384;
    thread_local std::vector<char> block(static_cast<size_t>(kStreamBlock) * 4);
    std::array<const void*, kMaxInputs> shifted{};
    for (int64_t b0 = 0; b0 < count; b0 += kStreamBlock) {
      const int64_t n = std::min(kStreamBlock, count - b0);
      for (size_t k = 0; k < inputs.size(); ++k) {
        shifted[k] = static_cast<const char*>(inputs[k]) + b0 * elem;
      }
      reduce(op, block.data(), std::span(shifted.data(), inputs.size()), n, divisor);
      stream_copy(static_cast<char*>(out) + b0 * elem, block.data(), n * elem);
    }
    return;
  }
#endif
  reduce(op, out, inputs, count, divisor);
}

void copy_buffer(void* dst, const void* src, int64_t bytes) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (bytes >= kStreamingBytes && has_avx512()) {
    stream_copy(static_cast<char*>(dst), static_cast<const char*>(src), bytes);
    return;
  }
#endif
  std::memcpy(dst, src, static_cast<size_t>(bytes));
}

}  // namespace weft::comm::detail
