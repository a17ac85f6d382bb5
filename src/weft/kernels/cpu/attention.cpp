#include "weft/kernels/impl/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>

#include "weft/core/exec_context.h"
#include "weft/kernels/attention_dims.h"
#include "weft/kernels/cpu/attention_rows.h"
#include "weft/kernels/elementwise.h"
#include "weft/kernels/impl/gemm.h"
#include "weft/kernels/random.h"

namespace weft::kernels::impl {

namespace {

using namespace cpu::attention_rows;
using detail::from_f32;
using detail::to_f32;

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

using Dims = detail::AttentionDims;

// Keeps t when it already has the shape and dtype, so steady-state calls reuse it.
void ensure(const ExecContext& ec, Tensor& t, const Shape& shape, DType dtype) {
  if (!t.defined() || !(t.shape() == shape) || t.dtype() != dtype) t = ec.empty(shape, dtype);
}

int64_t element_bytes(DType dt) { return dt == DType::f32 ? 4 : 2; }

// Workspace regions start on cache lines.
int64_t aligned(int64_t bytes) { return (bytes + 63) / 64 * 64; }

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
char* scratch(const ExecContext& ec, AttentionWorkspace& ws, int64_t bytes) {
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
bool copies_heads(DType dt) { return dt == DType::bf16; }

// A head's (T x D) matrix: element (t, k) at data + (t·ld + k) elements.
struct Head {
  char* data;
  int64_t ld;
};

// Head h of batch entry b of part `part` (0 q, 1 k, 2 v; 0 for out and dout)
// of a (B, T, width) or (T, B, width) activation, or of its dense
// (B, heads, T, D) copy; h counts the part's own heads (key/value heads for
// k and v).
Head head(const Tensor& t, const Dims& d, int64_t part, const char* dense, int64_t b, int64_t h) {
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
void pack_heads(const ExecContext& ec, const Tensor& t, const Dims& d,
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
StridedMatrices matrix(const void* p, DType dt, int64_t rows, int64_t cols, int64_t ld,
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
StridedMatrices rows_of(const Head& h, DType dt, int64_t first, int64_t rows, int64_t D,
                        bool transposed = false) {
  const void* p = h.data + first * h.ld * element_bytes(dt);
  return transposed ? matrix(p, dt, D, rows, h.ld, true) : matrix(p, dt, rows, D, h.ld);
}

// c = alpha·a·b (+ c) on the calling thread: the block products run inside
// the kernels' own parallel region, one block per thread.
void product(const StridedMatrices& a, const StridedMatrices& b, const StridedMatrices& c,
             float alpha = 1.0f, bool accumulate = false) {
  static const ExecContext one_thread(Device::cpu(), 1);
  batched_gemm<Backend::cpu>(one_thread, a, b, c, alpha, accumulate);
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

// How many of the n keys k0 .. k0+n-1 row t sees.
inline int64_t visible(const AttentionConfig& cfg, int64_t t, int64_t k0, int64_t n) {
  return cfg.causal ? std::clamp<int64_t>(t - k0 + 1, 0, n) : n;
}

// Keys of a key block that any of the query rows q0 .. q0+m-1 sees.
inline int64_t keys_seen(const AttentionConfig& cfg, int64_t q0, int64_t m, int64_t k0, int64_t n) {
  return cfg.causal ? std::min(n, q0 + m - k0) : n;
}

// The stream number of entry (bh, t, k0) of the (B·H, T, T) probabilities.
inline uint64_t dropout_counter(const AttentionConfig& cfg, int64_t T, int64_t bh, int64_t t,
                                int64_t k0) {
  return cfg.offset + static_cast<uint64_t>((bh * T + t) * T + k0);
}

// Whether the product with V (or its gradient) needs the probabilities in a
// buffer of their own: in bf16 (the product reads bf16) or with dropout.
bool separate_weights(DType dt, const AttentionConfig& cfg) {
  return dt != DType::f32 || cfg.dropout > 0.0f;
}

// ---------------------------------------------------------------------------
// Forward: one query block of one head per item.

struct ForwardScratch {
  float* s;    // (Bq, Bk) scores, then e^(s - max)
  char* w;     // (Bq, Bk) in qkv's dtype: what multiplies V (when separate_weights)
  float* acc;  // (Bq, D) unnormalized output
  float* max;  // (Bq) running row max
  float* sum;  // (Bq) running row sum of e^(s - max)

  static ForwardScratch carve(Carve& c, const Dims& d, DType dt) {
    ForwardScratch s;
    s.s = c.take<float>(kQueryBlock * kKeyBlock);
    s.w = c.bytes(kQueryBlock * kKeyBlock * element_bytes(dt));
    s.acc = c.take<float>(kQueryBlock * d.D);
    s.max = c.take<float>(kQueryBlock);
    s.sum = c.take<float>(kQueryBlock);
    return s;
  }
};

struct ForwardArgs {
  const Dims& d;
  const AttentionConfig& cfg;
  DType dt;
  const Tensor& qkv;
  Tensor& out;
  float* lse;
  const char* dense[3];  // dense copies of q, k, v (bf16) or null
};

// Rows q0 .. q0+m-1 of head (b, h).
template <typename T>
void forward_block(const ForwardArgs& a, int64_t b, int64_t h, int64_t q0, int64_t m,
                   const ForwardScratch& s) {
  const Dims& d = a.d;
  const AttentionConfig& cfg = a.cfg;
  const int64_t bh = b * d.H + h;
  const int64_t g = d.kv_head(h);
  const Head q = head(a.qkv, d, 0, a.dense[0], b, h), k = head(a.qkv, d, 1, a.dense[1], b, g),
             v = head(a.qkv, d, 2, a.dense[2], b, g);
  const bool dropout = cfg.dropout > 0.0f;
  const float keep_scale = 1.0f / (1.0f - cfg.dropout);
  const bool separate = separate_weights(a.dt, cfg);
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(d.D));
  std::fill(s.max, s.max + m, -std::numeric_limits<float>::infinity());
  std::fill(s.sum, s.sum + m, 0.0f);
  std::fill(s.acc, s.acc + m * d.D, 0.0f);
  T* w = reinterpret_cast<T*>(s.w);
  const int64_t key_end = cfg.causal ? q0 + m : d.T;
  for (int64_t k0 = 0; k0 < key_end; k0 += kKeyBlock) {
    const int64_t n = keys_seen(cfg, q0, m, k0, std::min(kKeyBlock, d.T - k0));
    // s = Q·Kᵀ/√D
    product(rows_of(q, a.dt, q0, m, d.D), rows_of(k, a.dt, k0, n, d.D, true),
            matrix(s.s, DType::f32, m, n, n), inv_sqrt_d);
    for (int64_t r = 0; r < m; ++r) {
      const int64_t t = q0 + r, seen = visible(cfg, t, k0, n);
      float* sr = s.s + r * n;
      T* wr = w + r * n;
      float max = s.max[r];
      const float sum = exp_row_online(sr, seen, &max);
      std::fill(sr + seen, sr + n, 0.0f);
      // Rescales what earlier blocks added (e^(old max - new max); 0 before
      // the first block, whose max was -inf).
      const float rescale = seen > 0 ? exp_nonpositive(s.max[r] - max) : 1.0f;
      s.max[r] = max;
      s.sum[r] = s.sum[r] * rescale + sum;
      if (rescale != 1.0f) scale_row(s.acc + r * d.D, d.D, rescale);
      if (dropout) {
        for_each_uniform(cfg.seed, dropout_counter(cfg, d.T, bh, t, k0), n,
                         [&](int64_t j, float u) {
                           wr[j] = from_f32<T>(u >= cfg.dropout ? sr[j] * keep_scale : 0.0f);
                         });
      } else if (separate) {
        bf16_row(sr, reinterpret_cast<uint16_t*>(wr), n);  // T is bf16 here
      }
    }
    // acc += weights·V
    product(separate ? matrix(s.w, a.dt, m, n, n) : matrix(s.s, DType::f32, m, n, n),
            rows_of(v, a.dt, k0, n, d.D), matrix(s.acc, DType::f32, m, d.D, d.D), 1.0f, true);
  }
  const Head o = head(a.out, d, 0, nullptr, b, h);
  for (int64_t r = 0; r < m; ++r) {
    const float inv = 1.0f / s.sum[r];
    T* orow = reinterpret_cast<T*>(o.data) + (q0 + r) * o.ld;
    const float* acc = s.acc + r * d.D;
    for (int64_t c = 0; c < d.D; ++c) orow[c] = from_f32<T>(acc[c] * inv);
    a.lse[bh * d.T + q0 + r] = s.max[r] + std::log(s.sum[r]);
  }
}

// ---------------------------------------------------------------------------
// Backward: one head per item (its dQ gathers every key block's share).

// Under grouped-query attention (Hkv < H) the query heads of a key/value head
// run one after the other on the same item, each adding to its dK and dV,
// which then span all T keys; multi-head attention keeps one key block's.
bool grouped(const Dims& d) { return d.Hkv != d.H; }

struct BackwardScratch {
  float* dq;      // (T, D)
  float* dk;      // (Bk, D), (T, D) when grouped
  float* dv;      // (Bk, D), (T, D) when grouped
  float* delta;   // (T): Σ_k dO·O per row
  float* p;       // (Bq, Bk) scores, then probabilities
  float* dp;      // (Bq, Bk) dO·Vᵀ, then (f32 without dropout) dS
  char* w;        // (Bq, Bk) in qkv's dtype: the weights that multiplied V
  char* ds;       // (Bq, Bk) bf16 dS (f32 dS takes dp.s place)
  uint8_t* keep;  // (Bq, Bk) dropout decisions

  static BackwardScratch carve(Carve& c, const Dims& d, DType dt) {
    BackwardScratch s;
    const int64_t block = kBackwardQueryBlock * kBackwardKeyBlock;
    s.dq = c.take<float>(d.T * d.D);
    const int64_t key_rows = grouped(d) ? d.T : kBackwardKeyBlock;
    s.dk = c.take<float>(key_rows * d.D);
    s.dv = c.take<float>(key_rows * d.D);
    s.delta = c.take<float>(d.T);
    s.p = c.take<float>(block);
    s.dp = c.take<float>(block);
    s.w = c.bytes(block * element_bytes(dt));
    s.ds = c.bytes(block * element_bytes(dt));
    s.keep = c.take<uint8_t>(block);
    return s;
  }
};

struct BackwardArgs {
  const Dims& d;
  const AttentionConfig& cfg;
  DType dt;
  const Tensor& qkv;
  const Tensor& out;
  const Tensor& dout;
  Tensor& dqkv;
  const float* lse;
  const char* dense[4];  // dense copies of q, k, v, dO (bf16) or null
};

// Rows first .. first+rows-1 of an f32 (rows, D) accumulator times `scale`
// into a head of a dtype-T activation.
template <typename T>
void store_rows(const float* src, float scale, const Head& dst, int64_t first, int64_t rows,
                int64_t D) {
  for (int64_t r = 0; r < rows; ++r) {
    T* row = reinterpret_cast<T*>(dst.data) + (first + r) * dst.ld;
    for (int64_t c = 0; c < D; ++c) row[c] = from_f32<T>(src[r * D + c] * scale);
  }
}

// delta[t] = Σ_c dO·O over the D columns of every row t < rows of a head.
template <typename T>
void row_deltas(const Head& o, const Head& g, int64_t rows, int64_t D, float* delta) {
  for (int64_t t = 0; t < rows; ++t) {
    const T* orow = reinterpret_cast<const T*>(o.data) + t * o.ld;
    const T* grow = reinterpret_cast<const T*>(g.data) + t * g.ld;
    float dot = 0.0f;
    for (int64_t c = 0; c < D; ++c) dot += to_f32(orow[c]) * to_f32(grow[c]);
    delta[t] = dot;
  }
}

// dS = P ∘ (dP·mask·keep_scale - delta) of the (m, n) block of query rows q0
// on: bf16 into s.ds, or f32 over s.dp.
void softmax_grads(const BackwardScratch& s, int64_t q0, int64_t m, int64_t n, float keep_scale,
                   bool dropout, bool bf16) {
  for (int64_t r = 0; r < m; ++r) {
    const float delta = s.delta[q0 + r];
    const float* pr = s.p + r * n;
    float* gr = s.dp + r * n;
    if (dropout) {
      const uint8_t* kr = s.keep + r * n;
      for (int64_t j = 0; j < n; ++j) gr[j] *= kr[j] ? keep_scale : 0.0f;
    }
    if (bf16) {
      softmax_grad_row(pr, gr, reinterpret_cast<uint16_t*>(s.ds) + r * n, n, delta);
    } else {
      softmax_grad_row(pr, gr, n, delta);
    }
  }
}

// P = e^(Q·Kᵀ/√D - lse) of the (m, n) block of query rows q0 and keys k0 of
// head bh into s.p (0 where masked), and what multiplies dO into s.w (with
// dropout: P·keep/(1-p), the decisions in s.keep; bf16: P rounded).
template <typename T>
void block_probabilities(const BackwardArgs& a, int64_t bh, const Head& q, const Head& k,
                         int64_t q0, int64_t m, int64_t k0, int64_t n, const BackwardScratch& s) {
  const Dims& d = a.d;
  const AttentionConfig& cfg = a.cfg;
  const bool dropout = cfg.dropout > 0.0f;
  const float keep_scale = 1.0f / (1.0f - cfg.dropout);
  const bool separate = separate_weights(a.dt, cfg);
  const float* lse = a.lse + bh * d.T;
  product(rows_of(q, a.dt, q0, m, d.D), rows_of(k, a.dt, k0, n, d.D, true),
          matrix(s.p, DType::f32, m, n, n), 1.0f / std::sqrt(static_cast<float>(d.D)));
  T* w = reinterpret_cast<T*>(s.w);
  for (int64_t r = 0; r < m; ++r) {
    const int64_t t = q0 + r, seen = visible(cfg, t, k0, n);
    float* pr = s.p + r * n;
    exp_row(pr, seen, lse[t]);
    std::fill(pr + seen, pr + n, 0.0f);
    T* wr = w + r * n;
    if (dropout) {
      uint8_t* kr = s.keep + r * n;
      for_each_uniform(cfg.seed, dropout_counter(cfg, d.T, bh, t, k0), n, [&](int64_t j, float u) {
        kr[j] = u >= cfg.dropout;
        wr[j] = from_f32<T>(kr[j] ? pr[j] * keep_scale : 0.0f);
      });
    } else if (separate) {
      bf16_row(pr, reinterpret_cast<uint16_t*>(wr), n);  // T is bf16 here
    }
  }
}

// Query head h of batch entry b: its dQ, and its shares of the dK and dV of
// key/value head h mod Hkv. Multi-head attention stores those per key block;
// grouped, they accumulate over the group's heads in s.dk, s.dv (T, D),
// zeroed by the group's first head, and backward_group stores them.
template <typename T>
void backward_head(const BackwardArgs& a, int64_t b, int64_t h, const BackwardScratch& s) {
  const Dims& d = a.d;
  const AttentionConfig& cfg = a.cfg;
  const DType dt = a.dt;
  const int64_t bh = b * d.H + h, D = d.D, g = d.kv_head(h);
  const Head q = head(a.qkv, d, 0, a.dense[0], b, h), k = head(a.qkv, d, 1, a.dense[1], b, g),
             v = head(a.qkv, d, 2, a.dense[2], b, g), dout = head(a.dout, d, 0, a.dense[3], b, h);
  const bool dropout = cfg.dropout > 0.0f, separate = separate_weights(dt, cfg);
  const bool bf16 = dt == DType::bf16, group = grouped(d), first = h < d.Hkv;
  const float keep_scale = 1.0f / (1.0f - cfg.dropout);
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(D));

  row_deltas<T>(head(a.out, d, 0, nullptr, b, h), head(a.dout, d, 0, nullptr, b, h), d.T, D,
                s.delta);
  std::fill(s.dq, s.dq + d.T * D, 0.0f);
  for (int64_t k0 = 0; k0 < d.T; k0 += kBackwardKeyBlock) {
    const int64_t n_block = std::min(kBackwardKeyBlock, d.T - k0);
    float* dk = s.dk + (group ? k0 * D : 0);
    float* dv = s.dv + (group ? k0 * D : 0);
    if (!group || first) {
      std::fill(dk, dk + n_block * D, 0.0f);
      std::fill(dv, dv + n_block * D, 0.0f);
    }
    // Under the causal mask, query rows before k0 see none of these keys.
    for (int64_t q0 = cfg.causal ? k0 : 0; q0 < d.T; q0 += kBackwardQueryBlock) {
      const int64_t m = std::min(kBackwardQueryBlock, d.T - q0);
      const int64_t n = keys_seen(cfg, q0, m, k0, n_block);
      block_probabilities<T>(a, bh, q, k, q0, m, k0, n, s);
      // dV += weightsᵀ·dO
      product(separate ? matrix(s.w, dt, n, m, n, true) : matrix(s.p, DType::f32, n, m, n, true),
              rows_of(dout, dt, q0, m, D), matrix(dv, DType::f32, n, D, D), 1.0f, true);
      // dP = dO·Vᵀ; dS = P ∘ (dP·mask/(1-p) - Σ_k dO·O)
      product(rows_of(dout, dt, q0, m, D), rows_of(v, dt, k0, n, D, true),
              matrix(s.dp, DType::f32, m, n, n));
      softmax_grads(s, q0, m, n, keep_scale, dropout, bf16);
      // dS: bf16 in its own buffer, f32 in place of dP.
      const StridedMatrices dsm = bf16 ? matrix(s.ds, dt, m, n, n)
                                       : matrix(s.dp, DType::f32, m, n, n),
                            dst = bf16 ? matrix(s.ds, dt, n, m, n, true)
                                       : matrix(s.dp, DType::f32, n, m, n, true);
      // dQ += dS·K/√D, dK += dSᵀ·Q/√D
      product(dsm, rows_of(k, dt, k0, n, D), matrix(s.dq + q0 * D, DType::f32, m, D, D), inv_sqrt_d,
              true);
      product(dst, rows_of(q, dt, q0, m, D), matrix(dk, DType::f32, n, D, D), inv_sqrt_d, true);
    }
    if (!group) {
      store_rows<T>(dk, 1.0f, head(a.dqkv, d, 1, nullptr, b, g), k0, n_block, D);
      store_rows<T>(dv, 1.0f, head(a.dqkv, d, 2, nullptr, b, g), k0, n_block, D);
    }
  }
  store_rows<T>(s.dq, 1.0f, head(a.dqkv, d, 0, nullptr, b, h), 0, d.T, D);
}

// Key/value head g of batch entry b and the query heads g, g + Hkv, ... that
// read it, in that order (one item, so that no two threads add to one dK).
template <typename T>
void backward_group(const BackwardArgs& a, int64_t b, int64_t g, const BackwardScratch& s) {
  const Dims& d = a.d;
  for (int64_t h = g; h < d.H; h += d.Hkv) backward_head<T>(a, b, h, s);
  if (grouped(d)) {
    store_rows<T>(s.dk, 1.0f, head(a.dqkv, d, 1, nullptr, b, g), 0, d.T, d.D);
    store_rows<T>(s.dv, 1.0f, head(a.dqkv, d, 2, nullptr, b, g), 0, d.T, d.D);
  }
}

}  // namespace

template <>
void attention_forward<Backend::cpu>(const ExecContext& ec, const Tensor& qkv,
                                     const AttentionConfig& cfg, Tensor& out, AttentionSaved& saved,
                                     AttentionWorkspace& workspace) {
  const Dims d = detail::attention_dims(qkv, cfg);
  const DType dt = qkv.dtype();
  ensure(ec, saved.lse, {d.B, d.H, d.T}, DType::f32);
  saved.out = out;
  if (d.B * d.T == 0) return;

  // Workspace: the dense copies (bf16), then one block scratch per thread.
  const int threads = std::max(ec.threads(), 1);
  const int64_t heads_bytes = copies_heads(dt) ? aligned(d.B * d.T * d.C * element_bytes(dt)) : 0;
  Carve per_thread;
  ForwardScratch::carve(per_thread, d, dt);
  char* base = scratch(ec, workspace, 3 * heads_bytes + threads * per_thread.used);
  ForwardArgs args{d, cfg, dt, qkv, out, saved.lse.data<float>(), {}};
  if (copies_heads(dt)) {
    char* copy[3] = {base, base + heads_bytes, base + 2 * heads_bytes};
    pack_heads(ec, qkv, d, {{0, copy[0]}, {1, copy[1]}, {2, copy[2]}});
    for (int p = 0; p < 3; ++p) args.dense[p] = copy[p];
  }
  // The last query blocks (which see the most keys) go first.
  const int64_t blocks = (d.T + kQueryBlock - 1) / kQueryBlock, heads = d.B * d.H;
  detail::dispatch_float(dt, [&]<typename T>() {
    for_each_item(ec, heads * blocks, [&](int64_t item, int thread) {
      const int64_t bh = item % heads, q0 = (blocks - 1 - item / heads) * kQueryBlock;
      Carve c{base + 3 * heads_bytes + thread * per_thread.used};
      forward_block<T>(args, bh / d.H, bh % d.H, q0, std::min(kQueryBlock, d.T - q0),
                       ForwardScratch::carve(c, d, dt));
    });
  });
}

template <>
void attention_backward<Backend::cpu>(const ExecContext& ec, const Tensor& dout, const Tensor& qkv,
                                      const AttentionSaved& saved, const AttentionConfig& cfg,
                                      Tensor& dqkv, AttentionWorkspace& workspace) {
  const Dims d = detail::attention_dims(qkv, cfg);
  const DType dt = qkv.dtype();
  if (d.B * d.T == 0) return;

  const int threads = std::max(ec.threads(), 1);
  const int64_t heads_bytes = copies_heads(dt) ? aligned(d.B * d.T * d.C * element_bytes(dt)) : 0;
  Carve per_thread;
  BackwardScratch::carve(per_thread, d, dt);
  char* base = scratch(ec, workspace, 4 * heads_bytes + threads * per_thread.used);
  BackwardArgs args{d, cfg, dt, qkv, saved.out, dout, dqkv, saved.lse.data<float>(), {}};
  if (copies_heads(dt)) {
    char* copy[4] = {base, base + heads_bytes, base + 2 * heads_bytes, base + 3 * heads_bytes};
    pack_heads(ec, qkv, d, {{0, copy[0]}, {1, copy[1]}, {2, copy[2]}});
    pack_heads(ec, dout, d, {{0, copy[3]}});
    for (int p = 0; p < 4; ++p) args.dense[p] = copy[p];
  }
  const int64_t groups = d.B * d.Hkv;
  detail::dispatch_float(dt, [&]<typename T>() {
    for_each_item(ec, groups, [&](int64_t bg, int thread) {
      Carve c{base + 4 * heads_bytes + thread * per_thread.used};
      backward_group<T>(args, bg / d.Hkv, bg % d.Hkv, BackwardScratch::carve(c, d, dt));
    });
  });
}

template <>
Tensor attention_dropout_mask<Backend::cpu>(const ExecContext& ec, const AttentionConfig& cfg,
                                            int64_t batch, int64_t seq) {
  if (cfg.dropout <= 0.0f) return Tensor();
  Tensor mask = ec.empty({batch, cfg.heads, seq, seq}, DType::u8);
  uint8_t* m = mask.data<uint8_t>();
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
  for (int64_t row = 0; row < batch * cfg.heads * seq; ++row) {
    const int64_t t = row % seq, bh = row / seq;
    const int64_t seen = visible(cfg, t, 0, seq);
    uint8_t* mr = m + row * seq;
    for_each_uniform(cfg.seed, dropout_counter(cfg, seq, bh, t, 0), seen,
                     [&](int64_t j, float u) { mr[j] = u >= cfg.dropout; });
    std::fill(mr + seen, mr + seq, uint8_t{0});
  }
  return mask;
}

}  // namespace weft::kernels::impl
