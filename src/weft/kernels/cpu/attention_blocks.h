// What the fused CPU attention's forward (cpu/attention.cpp) and backward
// (cpu/attention_backward.cpp) share: block sizes, workspace carving, the
// heads inside the packed activations as matrices, and the block products.
// Internal to kernels/cpu.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>

#include "weft/core/exec_context.h"
#include "weft/kernels/attention_dims.h"
#include "weft/kernels/impl/gemm.h"

namespace weft::kernels::cpu::attention_blocks {

// The element type the row helpers take for storage type T (bf16 as its bits).
template <typename T>
using Raw = std::conditional_t<std::is_same_v<T, float>, float, uint16_t>;

// Query rows and keys per block, in forward and in backward. A block's
// scores, probabilities and gradients (64 KiB to 128 KiB each in f32) and its
// accumulators stay in the core's L2 cache while the block's products run;
// backward's blocks are taller because its five products per block run below
// oneDNN's small-matrix efficiency at 64 rows (measured: about 3x slower at
// T = 256). Under the causal mask a block starts at a key block's first row.
constexpr int64_t kQueryBlock = 64;
constexpr int64_t kKeyBlock = 256;
constexpr int64_t kBackwardQueryBlock = 256;
constexpr int64_t kBackwardKeyBlock = 128;

// Sequences of at most this many positions take the short path
// (cpu/attention_short.cpp): a head is one block, the forward keeps the
// probabilities (AttentionSaved::probs, B·H·T² floats: at most 4/3 of qkv's
// size for heads of 32) and backward reads them instead of recomputing them,
// each product running over several heads in one oneDNN call. Measured at
// T = 64 (B = 16, H = 4, D = 32, f32, one thread; medians of 5, load average
// ~10), forward / backward in ms: recomputing 2.07 / 4.05, the unfused
// kernels this replaced (whole-batch products over a saved P) 2.50 / 2.19,
// the short path 1.94 / 2.29; at T = 128 backward took 9.9 recomputing and
// 6.0 to 8.5 on the short path. Longer sequences recompute, keeping O(T) per
// head.
constexpr int64_t kShortSeq = 128;
static_assert(kShortSeq <= kKeyBlock);

using Dims = detail::AttentionDims;

inline bool short_path(const Dims& d) { return d.T <= kShortSeq; }

// Keeps t when it already has the shape and dtype, so steady-state calls reuse it.
inline void ensure(const ExecContext& ec, Tensor& t, const Shape& shape, DType dtype) {
  if (!t.defined() || !(t.shape() == shape) || t.dtype() != dtype) t = ec.empty(shape, dtype);
}

inline int64_t element_bytes(DType dt) { return dt == DType::f32 ? 4 : 2; }

// Workspace regions start on cache lines.
inline int64_t aligned(int64_t bytes) { return (bytes + 63) / 64 * 64; }

// Hands out consecutive cache-line-aligned regions of a buffer; with a null
// buffer it only adds up their sizes (to size the workspace first).
struct Carve {
  char* base = nullptr;
  int64_t used = 0;

  template <typename T>
  T* take(int64_t n) {
    T* p = base ? reinterpret_cast<T*>(base + used) : nullptr;
    used += aligned(n * static_cast<int64_t>(sizeof(T)));
    return p;
  }
  char* bytes(int64_t n) { return take<char>(n); }
};

// The first `bytes` bytes of the workspace, grown if it is smaller.
inline char* scratch(const ExecContext& ec, AttentionWorkspace& ws, int64_t bytes) {
  if (!ws.buffer.defined() || ws.buffer.nbytes() < bytes) {
    ws.buffer = ec.empty({std::max<int64_t>(bytes, 1)}, DType::u8);
  }
  return reinterpret_cast<char*>(ws.buffer.data<uint8_t>());
}

// Whether q, k and v (and dO) are multiplied from dense (B, H, T, D) copies
// rather than in place. oneDNN 2.6 runs its brgemm kernels (AMX for bf16)
// only on dense operands and falls back to gemm:jit, several times slower in
// bf16, for rows of a larger stride; the copies cost one pass over qkv. f32
// gains nothing from them and multiplies in place.
inline bool copies_heads(DType dt) { return dt == DType::bf16; }

// A head's (T x D) matrix: element (t, k) at data + (t·ld + k) elements.
struct Head {
  char* data;
  int64_t ld;
};

// Head h of batch entry b of part `part` (0 q, 1 k, 2 v; 0 for out and dout)
// of a (B, T, width) or (T, B, width) activation, or of its dense
// (B, heads, T, D) copy; h counts the part's own heads (key/value heads for
// k and v).
inline Head head(const Tensor& t, const Dims& d, int64_t part, const char* dense, int64_t b,
                 int64_t h) {
  const int64_t es = element_bytes(t.dtype());
  if (dense) {
    return {const_cast<char*>(dense) + (b * d.part_heads(part) + h) * d.T * d.D * es, d.D};
  }
  const int64_t width = t.size(2);
  return {static_cast<char*>(t.raw()) +
              (b * d.batch_rows() * width + d.part_column(part) + h * d.D) * es,
          d.position_rows() * width};
}

// A part (0 q, 1 k, 2 v) of a packed qkv tensor and its dense copy.
struct HeadCopy {
  int64_t part;
  char* dense;
};

// Copies parts of the packed qkv tensor t (or of a (B, T, C) tensor with part
// 0) into their dense copies, in one pass over the rows of t.
inline void pack_heads(const ExecContext& ec, const Tensor& t, const Dims& d,
                       std::initializer_list<HeadCopy> copies) {
  const int64_t es = element_bytes(t.dtype());
  const int64_t width = t.size(2) * es, head_bytes = d.D * es;
  const char* base = static_cast<const char*>(t.raw());
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
  for (int64_t row = 0; row < d.B * d.T; ++row) {
    const int64_t b = d.sequence_major ? row % d.B : row / d.T;
    const int64_t tt = d.sequence_major ? row / d.B : row % d.T;
    for (const HeadCopy& c : copies) {
      const int64_t heads = d.part_heads(c.part);
      const char* strided = base + row * width + d.part_column(c.part) * es;
      char* dense = c.dense + (b * heads * d.T + tt) * head_bytes;
      for (int64_t h = 0; h < heads; ++h) {
        std::memcpy(dense + h * d.T * head_bytes, strided + h * head_bytes,
                    static_cast<size_t>(head_bytes));
      }
    }
  }
}

// The (rows x cols) matrix at p, row-major with leading dimension ld, or
// (transposed) the transpose of the (cols x rows) row-major matrix there.
inline StridedMatrices matrix(const void* p, DType dt, int64_t rows, int64_t cols, int64_t ld,
                              bool transposed = false) {
  StridedMatrices m;
  m.data = const_cast<void*>(p);
  m.dtype = dt;
  m.rows = rows;
  m.cols = cols;
  m.row_stride = transposed ? 1 : ld;
  m.col_stride = transposed ? ld : 1;
  return m;
}

// Rows `first` .. of a head as a matrix of `rows` rows (transposed when asked).
inline StridedMatrices rows_of(const Head& h, DType dt, int64_t first, int64_t rows, int64_t D,
                               bool transposed = false) {
  const void* p = h.data + first * h.ld * element_bytes(dt);
  return transposed ? matrix(p, dt, D, rows, h.ld, true) : matrix(p, dt, rows, D, h.ld);
}

// c = alpha·a·b (+ c) on the calling thread: the block products run inside
// the kernels' own parallel region, one block per thread.
inline void product(const StridedMatrices& a, const StridedMatrices& b, const StridedMatrices& c,
                    float alpha = 1.0f, bool accumulate = false) {
  static const ExecContext one_thread(Device::cpu(), 1);
  impl::batched_gemm<Backend::cpu>(one_thread, a, b, c, alpha, accumulate);
}

// Runs f(item, thread) for item = 0 .. n-1 on the context's threads, handing
// out items in order as threads become free (blocks differ in cost under the
// causal mask).
template <typename F>
void for_each_item(const ExecContext& ec, int64_t n, F&& f) {
  const int threads = ec.threads();
  if (threads <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) f(i, 0);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int thread = omp_get_thread_num();
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < n; ++i) f(i, thread);
  }
}

// How far a query row's position lies past the key row's of the same index
// (AttentionConfig::query_position - key_position; 0 for a whole sequence).
inline int64_t position_shift(const AttentionConfig& cfg) {
  return cfg.query_position - cfg.key_position;
}

// How many of the n keys k0 .. k0+n-1 row t sees.
inline int64_t visible(const AttentionConfig& cfg, int64_t t, int64_t k0, int64_t n) {
  return cfg.causal ? std::clamp<int64_t>(t + position_shift(cfg) - k0 + 1, 0, n) : n;
}

// Keys of a key block that any of the query rows q0 .. q0+m-1 sees.
inline int64_t keys_seen(const AttentionConfig& cfg, int64_t q0, int64_t m, int64_t k0, int64_t n) {
  return cfg.causal ? std::min(n, q0 + m + position_shift(cfg) - k0) : n;
}

// The first query row that sees key k0 (0 without the causal mask).
inline int64_t first_query(const AttentionConfig& cfg, int64_t k0) {
  return cfg.causal ? std::max<int64_t>(k0 - position_shift(cfg), 0) : 0;
}

// The stream number of entry (bh, t, k0) of the (B·H, S, S) probabilities of
// the whole sequence (S: cfg.sequence, or the call's T).
inline uint64_t dropout_counter(const AttentionConfig& cfg, int64_t T, int64_t bh, int64_t t,
                                int64_t k0) {
  const int64_t S = cfg.sequence > 0 ? cfg.sequence : T;
  return cfg.offset +
         static_cast<uint64_t>((bh * S + cfg.query_position + t) * S + cfg.key_position + k0);
}

// Whether the product with V (or its gradient) needs the probabilities in a
// buffer of their own: in bf16 (the product reads bf16) or with dropout.
inline bool separate_weights(DType dt, const AttentionConfig& cfg) {
  return dt != DType::f32 || cfg.dropout > 0.0f;
}

// The short path's forward and backward (cpu/attention_short.cpp), for
// short_path(d): the same contract as the kernels of kernels/attention.h, with
// saved.lse allocated by the caller and saved.probs by the forward.
void short_attention_forward(const ExecContext& ec, const Tensor& qkv, const AttentionConfig& cfg,
                             Tensor& out, AttentionSaved& saved, AttentionWorkspace& ws);
void short_attention_backward(const ExecContext& ec, const Tensor& dout, const Tensor& qkv,
                              const AttentionSaved& saved, const AttentionConfig& cfg, Tensor& dqkv,
                              AttentionWorkspace& ws);

}  // namespace weft::kernels::cpu::attention_blocks
