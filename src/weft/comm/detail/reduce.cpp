#include "weft/comm/detail/reduce.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define WEFT_X86 1
#include <immintrin.h>
#else
#define WEFT_X86 0
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <type_traits>
#include <vector>

#include "weft/core/cuda.h"
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
#if WEFT_X86
// For the AVX-512 forms below (`vapply`): always inlined into the register
// kernel, which is compiled for AVX-512.
#define WEFT_AVX512_INLINE [[gnu::target("avx512f"), gnu::always_inline]] static inline
#endif

struct Add {
  static float apply(float acc, float x) { return acc + x; }
#if WEFT_X86
  WEFT_AVX512_INLINE __m512 vapply(__m512 acc, __m512 x) { return _mm512_add_ps(acc, x); }
#endif
};
struct Max {
  static float apply(float acc, float x) { return (x > acc || x != x) ? x : acc; }
#if WEFT_X86
  WEFT_AVX512_INLINE __m512 vapply(__m512 acc, __m512 x) {
    const __mmask16 take =
        _mm512_cmp_ps_mask(x, acc, _CMP_GT_OQ) | _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    return _mm512_mask_mov_ps(acc, take, x);
  }
#endif
};

// What happens to the combined value before it is stored (avg scales).
// Division, not a multiply by 1/n, unless 1/n is exact, so that the average
// of equal values is exact.
struct Keep {
  static float apply(float v, float) { return v; }
#if WEFT_X86
  WEFT_AVX512_INLINE __m512 vapply(__m512 v, __m512) { return v; }
#endif
};
struct Multiply {
  static float apply(float v, float factor) { return v * factor; }
#if WEFT_X86
  WEFT_AVX512_INLINE __m512 vapply(__m512 v, __m512 factor) { return _mm512_mul_ps(v, factor); }
#endif
};
struct Divide {
  static float apply(float v, float divisor) { return v / divisor; }
#if WEFT_X86
  WEFT_AVX512_INLINE __m512 vapply(__m512 v, __m512 divisor) { return _mm512_div_ps(v, divisor); }
#endif
};

// Calls fn(Op{}, Finish{}, factor) with the combination and the finishing
// step of `op` (avg divides the sum by `divisor`).
template <typename Fn>
[[gnu::always_inline]] inline void with_reduction(ReduceOp op, int divisor, Fn&& fn) {
  if (op == ReduceOp::max) return fn(Max{}, Keep{}, 0.0f);
  if (op == ReduceOp::sum) return fn(Add{}, Keep{}, 0.0f);
  if (divisor == 1 || divisor == 2 || divisor == 4 || divisor == 8) {
    return fn(Add{}, Multiply{}, 1.0f / static_cast<float>(divisor));
  }
  fn(Add{}, Divide{}, static_cast<float>(divisor));
}

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
  // The lambda is always inlined, so it is compiled for each clone's target.
  with_reduction(
      op, divisor,
      [&]<typename Op, typename Finish>(Op, Finish, float factor) __attribute__((always_inline)) {
        reduce_loops<E, Op, Finish>(out, inputs, count, factor);
      });
}

// The loops are compiled for AVX-512 and AVX2 besides the baseline x86-64
// the library is built for, and the processor picks one at load time: with
// SSE2 alone (no 32 -> 16-bit narrowing) the bf16 loops take about twice as
// long as with AVX-512. Sanitizer builds (WEFT_NO_MULTIVERSIONING) keep the
// baseline only: the ifunc resolvers would run before the sanitizer runtime.
#if WEFT_X86 && !defined(WEFT_NO_MULTIVERSIONING)
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

// f64 and i64: combined in their own type, input by input in order (an i64
// sum wraps around, through unsigned arithmetic; avg truncates toward zero).
template <typename T>
T combine(ReduceOp op, T acc, T x) {
  if constexpr (std::is_integral_v<T>) {
    if (op == ReduceOp::max) return std::max(acc, x);
    return static_cast<T>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(x));
  } else {
    if (op == ReduceOp::max) return (x > acc || std::isnan(x)) ? x : acc;
    return acc + x;
  }
}

template <typename T>
void reduce_wide(ReduceOp op, void* out, std::span<const void* const> inputs, int64_t count,
                 int divisor) {
  const auto input = [&](size_t j) { return static_cast<const T*>(inputs[j]); };
  T* dst = static_cast<T*>(out);
  T acc[kBlock];
  for (int64_t b0 = 0; b0 < count; b0 += kBlock) {
    const int64_t m = std::min(kBlock, count - b0);
    for (int64_t i = 0; i < m; ++i) acc[i] = input(0)[b0 + i];
    for (size_t j = 1; j < inputs.size(); ++j) {
      const T* x = input(j) + b0;
      for (int64_t i = 0; i < m; ++i) acc[i] = combine(op, acc[i], x[i]);
    }
    if (op == ReduceOp::avg) {
      for (int64_t i = 0; i < m; ++i) acc[i] /= static_cast<T>(divisor);
    }
    std::copy_n(acc, m, dst + b0);
  }
}

}  // namespace

namespace {

#if WEFT_X86
// Streams `bytes` from src to dst; the caller fences (_mm_sfence) before
// anyone else may read dst.
[[gnu::target("avx512f")]] void stream_copy_unfenced(char* dst, const char* src, int64_t bytes) {
  const int64_t head =
      std::min(bytes, static_cast<int64_t>((64 - reinterpret_cast<uintptr_t>(dst) % 64) % 64));
  std::memcpy(dst, src, static_cast<size_t>(head));
  int64_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i), _mm512_loadu_si512(src + i));
  }
  std::memcpy(dst + i, src + i, static_cast<size_t>(bytes - i));
}

void stream_copy(char* dst, const char* src, int64_t bytes) {
  stream_copy_unfenced(dst, src, bytes);
  _mm_sfence();
}

bool has_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

// GCC 12 reports its own AVX-512 intrinsics' `_mm512_undefined_*` operands as
// maybe uninitialized once inlined here (GCC bug 105593).
#if !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// 64 bytes of elements as f32 vectors, and back: the vector forms of F32 and
// BF16 above, with the same rounding and NaN rules.
struct VF32 {
  static constexpr int kVectors = 1;
  WEFT_AVX512_INLINE void load(const char* p, __m512* v) { v[0] = _mm512_loadu_ps(p); }
  WEFT_AVX512_INLINE __m512i pack(const __m512* v) { return _mm512_castps_si512(v[0]); }
};

// bf16 pairs are split, not widened in order: the even elements shifted into
// the high halves of the 32-bit lanes, the odd ones masked in place. The
// reduction is element-wise, so the order does not matter, and packing puts
// every element back where it came from.
struct VBF16 {
  static constexpr int kVectors = 2;
  // The rounded bf16 in the high half of each lane (low half: garbage).
  WEFT_AVX512_INLINE __m512i round_high(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_or_epi32(rounded, nan, u, _mm512_set1_epi32(0x00400000));  // quieted
  }
  WEFT_AVX512_INLINE void load(const char* p, __m512* v) {
    const __m512i raw = _mm512_loadu_si512(p);
    v[0] = _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16));
    v[1] = _mm512_castsi512_ps(_mm512_and_si512(raw, _mm512_set1_epi32(-65536)));
  }
  WEFT_AVX512_INLINE __m512i pack(const __m512* v) {
    // (even >> 16) | (odd & 0xffff0000)
    return _mm512_ternarylogic_epi32(_mm512_srli_epi32(round_high(v[0]), 16), round_high(v[1]),
                                     _mm512_set1_epi32(-65536), 0xf8);
  }
};

// The reduction of `bytes` (a multiple of 64) into a 64-byte aligned `out`:
// every 64 bytes are combined in registers, input by input in order, and
// stored, past the caches when `Stream`. The same arithmetic as reduce_block,
// so the same bits. `out` may be one of the inputs: each 64 bytes are read
// from every input before they are stored.
template <typename V, typename Op, typename Finish, bool Stream>
[[gnu::target("avx512f")]] void reduce_vectors(char* out, std::span<const void* const> inputs,
                                               int64_t bytes, float factor) {
  const __m512 f = _mm512_set1_ps(factor);
  const size_t k = inputs.size();
  for (int64_t i = 0; i < bytes; i += 64) {
    __m512 acc[V::kVectors], x[V::kVectors];
    V::load(static_cast<const char*>(inputs[0]) + i, acc);
    for (size_t j = 1; j < k; ++j) {
      V::load(static_cast<const char*>(inputs[j]) + i, x);
      for (int v = 0; v < V::kVectors; ++v) acc[v] = Op::vapply(acc[v], x[v]);
    }
    for (int v = 0; v < V::kVectors; ++v) acc[v] = Finish::vapply(acc[v], f);
    if constexpr (Stream) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(out + i), V::pack(acc));
    } else {
      _mm512_store_si512(out + i, V::pack(acc));
    }
  }
  if constexpr (Stream) _mm_sfence();
}

#if !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic pop
#endif
#endif

}  // namespace

void reduce_buffers(DType dtype, ReduceOp op, void* out, std::span<const void* const> inputs,
                    int64_t count, int divisor) {
  WEFT_CHECK(!inputs.empty(), "internal: reduction over no inputs");
  WEFT_CHECK(
      dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f64 || dtype == DType::i64,
      "reductions need f32, bf16, f64 or i64 tensors, got {}", dtype_name(dtype));
  const auto elem = static_cast<uintptr_t>(dtype_bits(dtype) / 8);
  WEFT_CHECK(
      reinterpret_cast<uintptr_t>(out) % elem == 0 &&
          std::all_of(inputs.begin(), inputs.end(),
                      [&](const void* p) { return reinterpret_cast<uintptr_t>(p) % elem == 0; }),
      "internal: {} buffers of a reduction must be aligned to their element size",
      dtype_name(dtype));
  if (dtype == DType::f64) return reduce_wide<double>(op, out, inputs, count, divisor);
  if (dtype == DType::i64) return reduce_wide<int64_t>(op, out, inputs, count, divisor);
  auto reduce = dtype == DType::f32 ? reduce_f32 : reduce_bf16;
#if WEFT_X86
  constexpr size_t kMaxInputs = 64;
  if (count * static_cast<int64_t>(elem) >= kStreamingBytes && inputs.size() <= kMaxInputs &&
      has_avx512()) {
    // A large output is combined in registers and stored 64 bytes at a time;
    // out of place the stores stream past the caches, one memory pass less.
    // In place they must not: streaming would evict lines just read from the
    // same addresses. Elements before the first 64-byte boundary of `out` and
    // after the last one take the ordinary loops.
    const bool aliased = std::find(inputs.begin(), inputs.end(), out) != inputs.end();
    const auto shifted = [&](int64_t elements) {
      std::array<const void*, kMaxInputs> moved{};
      for (size_t j = 0; j < inputs.size(); ++j) {
        moved[j] = static_cast<const char*>(inputs[j]) + elements * static_cast<int64_t>(elem);
      }
      return moved;
    };
    const auto at = [&](int64_t elements) {
      return static_cast<char*>(out) + elements * static_cast<int64_t>(elem);
    };
    const int64_t head =
        static_cast<int64_t>((64 - reinterpret_cast<uintptr_t>(out) % 64) % 64 / elem);
    const int64_t body = (count - head) * static_cast<int64_t>(elem) / 64 * 64;
    const int64_t tail = head + body / static_cast<int64_t>(elem);
    reduce(op, out, inputs, head, divisor);
    const auto middle = shifted(head);
    const std::span<const void* const> in(middle.data(), inputs.size());
    with_reduction(op, divisor, [&]<typename Op, typename Finish>(Op, Finish, float factor) {
      const auto kernel = dtype == DType::f32 ? (aliased ? reduce_vectors<VF32, Op, Finish, false>
                                                         : reduce_vectors<VF32, Op, Finish, true>)
                                              : (aliased ? reduce_vectors<VBF16, Op, Finish, false>
                                                         : reduce_vectors<VBF16, Op, Finish, true>);
      kernel(at(head), in, body, factor);
    });
    const auto last = shifted(tail);
    reduce(op, at(tail), std::span(last.data(), inputs.size()), count - tail, divisor);
    return;
  }
#endif
  reduce(op, out, inputs, count, divisor);
}

void copy_buffer(void* dst, const void* src, int64_t bytes) {
#if WEFT_X86
  if (bytes >= kStreamingBytes && has_avx512()) {
    stream_copy(static_cast<char*>(dst), static_cast<const char*>(src), bytes);
    return;
  }
#endif
  if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));  // empty tensors: no pointers
}

void copy_to_many(std::span<void* const> dsts, const void* src, int64_t bytes) {
#if WEFT_X86
  if (dsts.size() > 1 && bytes >= kStreamingBytes && has_avx512()) {
    constexpr int64_t kCopyBlock = 16384;  // a third of a 48 KiB L1
    const char* s = static_cast<const char*>(src);
    for (int64_t b0 = 0; b0 < bytes; b0 += kCopyBlock) {
      const int64_t n = std::min(kCopyBlock, bytes - b0);
      for (void* d : dsts) stream_copy_unfenced(static_cast<char*>(d) + b0, s + b0, n);
    }
    _mm_sfence();
    return;
  }
#endif
  for (void* d : dsts) copy_buffer(d, src, bytes);
}

void copy_on(Device d, void* dst, const void* src, int64_t bytes) {
  if (d.is_cpu()) return copy_buffer(dst, src, bytes);
  cuda::copy_bytes(dst, d, src, d, static_cast<size_t>(bytes));
}

void settle(Device d) {
  if (d.is_cuda()) cuda::synchronize(nullptr, d.index);
}

}  // namespace weft::comm::detail
