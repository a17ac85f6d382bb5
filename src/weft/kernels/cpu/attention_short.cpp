// The short path of the fused CPU attention (attention_blocks.h kShortSeq):
// sequences of at most 128 positions, where a head is a single block. Each
// item is one batch entry and a range of key/value heads; its products run
// over all of its heads in one oneDNN call (batched matrices), the forward
// keeps P for backward, and backward runs the four products of the unfused
// kernels (dV, dP, dQ, dK) without recomputing P.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "weft/core/exec_context.h"
#include "weft/kernels/cpu/attention_blocks.h"
#include "weft/kernels/cpu/attention_rows.h"
#include "weft/kernels/elementwise.h"
#include "weft/kernels/random.h"

namespace weft::kernels::cpu::attention_blocks {

namespace {

using namespace attention_rows;
using detail::from_f32;
using detail::to_f32;

// One item: batch entry b and the key/value heads g0 .. g0+G-1 with their
// query heads; `blk` picks query heads blk·Hkv + g (grouped-query attention
// runs H/Hkv of them one after the other; multi-head attention only blk 0).
struct Item {
  int64_t b, g0, G, blk;
};

// Key/value heads per item: enough items for two per thread.
int64_t heads_per_item(const Dims& d, int threads) {
  const int64_t chunks = std::clamp<int64_t>((2 * threads + d.B - 1) / d.B, 1, d.Hkv);
  return (d.Hkv + chunks - 1) / chunks;
}

// Batches G matrices of m, batch_stride apart: the outer batch dimension (of
// one) gets the stride of a dense tensor holding them all, the largest, which
// keeps oneDNN on its fast kernels (a size-1 dimension inside the others took
// it to 8 GFLOP/s for the transposed V of dO·Vᵀ; a zero stride, to its
// reference kernel).
StridedMatrices batch_of(StridedMatrices m, int64_t G, int64_t batch_stride) {
  m.batch[1] = G;
  m.batch_stride[1] = batch_stride;
  m.batch_stride[0] =
      (G - 1) * batch_stride + (m.rows - 1) * m.row_stride + (m.cols - 1) * m.col_stride + 1;
  return m;
}

// The G (T x D) head matrices of the item in part `part` (0: its query
// heads, also of out and dout; 1, 2: its key/value heads) of t, or of t's
// dense copy; transposed (D x T) when asked.
StridedMatrices heads_of(const Tensor& t, const char* dense, const Dims& d, int64_t part,
                         const Item& it, bool transposed = false) {
  const int64_t first = part == 0 ? it.blk * d.Hkv + it.g0 : it.g0;
  const Head h = head(t, d, part, dense, it.b, first);
  const DType dt = t.dtype();
  return batch_of(
      transposed ? matrix(h.data, dt, d.D, d.T, h.ld, true) : matrix(h.data, dt, d.T, d.D, h.ld),
      it.G, dense ? d.T * d.D : d.D);
}

// G (rows x cols) matrices at p, one after the other (transposed when asked).
StridedMatrices stacked(const void* p, DType dt, int64_t G, int64_t rows, int64_t cols,
                        bool transposed = false) {
  return batch_of(
      transposed ? matrix(p, dt, cols, rows, cols, true) : matrix(p, dt, rows, cols, cols), G,
      rows * cols);
}

struct Args {
  const Dims& d;
  const AttentionConfig& cfg;
  DType dt;
  const Tensor& qkv;
  const Tensor& out;
  float* probs;  // (B, H, T, T)
  float* lse;    // (B, H, T): forward only
  const Tensor* dout;
  Tensor* dqkv;
  const char* dense[4];  // dense copies of q, k, v, dO (bf16) or null
  int64_t G;             // key/value heads per item

  int64_t head_index(const Item& it, int64_t i) const {
    return it.b * d.H + it.blk * d.Hkv + it.g0 + i;
  }
  float* probs_of(const Item& it) const { return probs + head_index(it, 0) * d.T * d.T; }
};

// Per-thread scratch: G squares of each kind, and (bf16) f32 dK and dV.
struct Scratch {
  char* w;        // the weights that multiply V, in qkv's dtype (separate_weights)
  uint8_t* keep;  // dropout decisions
  float* dp;      // dO·Vᵀ, then (f32) dS
  char* ds;       // bf16 dS
  float* dk;      // (G, T, D) f32 sums over the query heads (bf16)
  float* dv;
  char* vt;  // (G, D, T): the item's V heads transposed, in qkv's dtype

  static Scratch carve(Carve& c, const Dims& d, DType dt, int64_t G, bool backward) {
    Scratch s{};
    const int64_t square = G * d.T * d.T;
    s.w = c.bytes(square * element_bytes(dt));
    s.keep = c.take<uint8_t>(square);
    if (!backward) return s;
    s.dp = c.take<float>(square);
    s.ds = c.bytes(dt == DType::bf16 ? square * 2 : 0);
    s.dk = c.take<float>(dt == DType::bf16 ? G * d.T * d.D : 0);
    s.dv = c.take<float>(dt == DType::bf16 ? G * d.T * d.D : 0);
    s.vt = c.bytes(G * d.D * d.T * element_bytes(dt));
    return s;
  }
};

// The weights of row t of head bh from its probabilities pr: with dropout
// P·keep/(1-p) and the decisions, in bf16 P rounded; nothing in f32 without
// dropout (P multiplies V itself).
template <typename T>
void weights_row(const Args& a, int64_t bh, int64_t t, const float* pr, T* wr, uint8_t* kr) {
  const AttentionConfig& cfg = a.cfg;
  const int64_t n = a.d.T;
  if (cfg.dropout > 0.0f) {
    const float keep_scale = 1.0f / (1.0f - cfg.dropout);
    for_each_uniform(cfg.seed, dropout_counter(cfg, n, bh, t, 0), n, [&](int64_t j, float u) {
      kr[j] = u >= cfg.dropout;
      wr[j] = from_f32<T>(kr[j] ? pr[j] * keep_scale : 0.0f);
    });
  } else if (separate_weights(a.dt, cfg)) {
    bf16_row(pr, reinterpret_cast<uint16_t*>(wr), n);  // T is bf16 here
  }
}

// Scores -> probabilities over the item's rows (in place), their logsumexps
// and weights. The masked scores go in as -inf so that the exponentials run
// over whole vectors (e^-87 each, absorbed by a sum of at least 1, then 0).
template <typename T>
void softmax_rows(const Args& a, const Item& it, float* p, const Scratch& s) {
  const int64_t n = a.d.T;
  for (int64_t i = 0; i < it.G; ++i) {
    const int64_t bh = a.head_index(it, i);
    for (int64_t t = 0; t < n; ++t) {
      const int64_t row = i * n + t, seen = visible(a.cfg, t, 0, n);
      float* pr = p + row * n;
      std::fill(pr + seen, pr + n, -std::numeric_limits<float>::infinity());
      float max = -std::numeric_limits<float>::infinity();
      const float sum = exp_row_online(pr, n, &max);
      std::fill(pr + seen, pr + n, 0.0f);
      scale_row(pr, seen, 1.0f / sum);
      a.lse[bh * n + t] = max + std::log(sum);
      weights_row<T>(a, bh, t, pr, reinterpret_cast<T*>(s.w) + row * n, s.keep + row * n);
    }
  }
}

template <typename T>
void forward_item(const Args& a, const Item& it, const Scratch& s) {
  const Dims& d = a.d;
  float* p = a.probs_of(it);
  // S = Q·Kᵀ/√D, in place of P
  product(heads_of(a.qkv, a.dense[0], d, 0, it), heads_of(a.qkv, a.dense[1], d, 1, it, true),
          stacked(p, DType::f32, it.G, d.T, d.T), 1.0f / std::sqrt(static_cast<float>(d.D)));
  softmax_rows<T>(a, it, p, s);
  // out = weights·V
  product(separate_weights(a.dt, a.cfg) ? stacked(s.w, a.dt, it.G, d.T, d.T)
                                        : stacked(p, DType::f32, it.G, d.T, d.T),
          heads_of(a.qkv, a.dense[2], d, 2, it), heads_of(a.out, nullptr, d, 0, it));
}

// dS = P ∘ (dP·keep/(1-p) - Σ_j dP·keep/(1-p)·P) over the item's rows:
// f32 over s.dp, bf16 into s.ds. A block of a longer sequence
// (AttentionConfig::sequence) sees only some of its rows' keys: there the sum
// is the whole row's, Σ_k dO·O over the saved (merged) output, which it
// equals for a whole row.
template <typename T>
void softmax_grad_rows(const Args& a, const Item& it, const float* p, const Scratch& s) {
  const int64_t n = a.d.T;
  const bool dropout = a.cfg.dropout > 0.0f, bf16 = a.dt == DType::bf16;
  const bool block = a.cfg.sequence > 0;
  const float keep_scale = 1.0f / (1.0f - a.cfg.dropout);
  for (int64_t row = 0; row < it.G * n; ++row) {
    float* g = s.dp + row * n;
    const float* pr = p + row * n;
    if (dropout) {
      const uint8_t* kr = s.keep + row * n;
      for (int64_t j = 0; j < n; ++j) g[j] *= kr[j] ? keep_scale : 0.0f;
    }
    float delta = 0.0f;
    if (block) {
      const int64_t h = a.head_index(it, row / n) - it.b * a.d.H, t = row % n;
      const Head o = head(a.out, a.d, 0, nullptr, it.b, h),
                 go = head(*a.dout, a.d, 0, nullptr, it.b, h);
      delta = dot_row(reinterpret_cast<const Raw<T>*>(o.data) + t * o.ld,
                      reinterpret_cast<const Raw<T>*>(go.data) + t * go.ld, a.d.D);
    } else {
      delta = dot_row(g, pr, n);
    }
    if (bf16) {
      softmax_grad_row(pr, g, reinterpret_cast<uint16_t*>(s.ds) + row * n, n, delta);
    } else {
      softmax_grad_row(pr, g, n, delta);
    }
  }
}

// The item's V heads transposed into vt (G, D, T). oneDNN multiplies dO by
// a transposed V about 1.4x slower than by a dense Vᵀ (f32, T = 64, D = 64,
// one thread: 1.0 against 0.72 ms for 48 heads), and the copy costs less
// than the difference (0.82 ms with it).
template <typename T>
void transpose_values(const Args& a, const Item& it, T* vt) {
  const Dims& d = a.d;
  for (int64_t i = 0; i < it.G; ++i) {
    const Head v = head(a.qkv, d, 2, a.dense[2], it.b, it.g0 + i);
    T* dst = vt + i * d.D * d.T;
    for (int64_t t = 0; t < d.T; ++t) {
      const T* row = reinterpret_cast<const T*>(v.data) + t * v.ld;
      for (int64_t k = 0; k < d.D; ++k) dst[k * d.T + t] = row[k];
    }
  }
}

// The item's query block `it.blk`: dQ into dqkv, dK and dV into dqkv (f32:
// summed there over the blocks) or into the f32 scratch (bf16).
template <typename T>
void backward_item(const Args& a, const Item& it, const Scratch& s) {
  const Dims& d = a.d;
  const DType dt = a.dt;
  const bool bf16 = dt == DType::bf16, add = it.blk > 0;
  const float* p = a.probs_of(it);
  for (int64_t row = 0; row < it.G * d.T; ++row) {
    weights_row<T>(a, a.head_index(it, row / d.T), row % d.T, p + row * d.T,
                   reinterpret_cast<T*>(s.w) + row * d.T, s.keep + row * d.T);
  }
  const StridedMatrices dout = heads_of(*a.dout, a.dense[3], d, 0, it);
  const StridedMatrices dk = bf16 ? stacked(s.dk, DType::f32, it.G, d.T, d.D)
                                  : heads_of(*a.dqkv, nullptr, d, 1, it),
                        dv = bf16 ? stacked(s.dv, DType::f32, it.G, d.T, d.D)
                                  : heads_of(*a.dqkv, nullptr, d, 2, it);
  // dV (+)= weightsᵀ·dO
  product(separate_weights(dt, a.cfg) ? stacked(s.w, dt, it.G, d.T, d.T, true)
                                      : stacked(p, DType::f32, it.G, d.T, d.T, true),
          dout, dv, 1.0f, add);
  // dP = dO·Vᵀ, then dS (the key/value heads are the same for every block)
  if (it.blk == 0) transpose_values(a, it, reinterpret_cast<T*>(s.vt));
  product(dout, stacked(s.vt, dt, it.G, d.D, d.T), stacked(s.dp, DType::f32, it.G, d.T, d.T));
  softmax_grad_rows<T>(a, it, p, s);
  const void* ds = bf16 ? static_cast<const void*>(s.ds) : s.dp;
  const DType ds_type = bf16 ? DType::bf16 : DType::f32;
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(d.D));
  // dQ = dS·K/√D, dK (+)= dSᵀ·Q/√D
  product(stacked(ds, ds_type, it.G, d.T, d.T), heads_of(a.qkv, a.dense[1], d, 1, it),
          heads_of(*a.dqkv, nullptr, d, 0, it), inv_sqrt_d);
  product(stacked(ds, ds_type, it.G, d.T, d.T, true), heads_of(a.qkv, a.dense[0], d, 0, it), dk,
          inv_sqrt_d, add);
}

// bf16: the f32 sums of dK and dV of the item's key/value heads into dqkv.
void store_kv_grads(const Args& a, const Item& it, const Scratch& s) {
  const Dims& d = a.d;
  for (int64_t i = 0; i < it.G; ++i) {
    for (int part = 1; part <= 2; ++part) {
      const Head h = head(*a.dqkv, d, part, nullptr, it.b, it.g0 + i);
      const float* src = (part == 1 ? s.dk : s.dv) + i * d.T * d.D;
      for (int64_t t = 0; t < d.T; ++t) {
        scaled_row(src + t * d.D, 1.0f, reinterpret_cast<uint16_t*>(h.data) + t * h.ld, d.D);
      }
    }
  }
}

// The workspace: `copies` dense copies of (B, T, C) first (bf16), then one
// scratch per thread.
struct Layout {
  char* copy[4];
  char* scratches;
  int64_t per_thread;
};

Layout layout(const ExecContext& ec, const Args& a, AttentionWorkspace& ws, int copies,
              bool backward) {
  const Dims& d = a.d;
  const int threads = std::max(ec.threads(), 1);
  const int64_t heads_bytes =
      copies_heads(a.dt) ? aligned(d.B * d.T * d.C * element_bytes(a.dt)) : 0;
  Carve per_thread;
  Scratch::carve(per_thread, d, a.dt, a.G, backward);
  char* base = scratch(ec, ws, copies * heads_bytes + threads * per_thread.used);
  Layout l{{}, base + copies * heads_bytes, per_thread.used};
  for (int i = 0; i < copies && heads_bytes; ++i) l.copy[i] = base + i * heads_bytes;
  return l;
}

// Runs f(item, scratch) over every batch entry and range of key/value heads
// on the context's threads.
template <typename F>
void for_each_range(const ExecContext& ec, const Args& a, const Layout& l, bool backward, F&& f) {
  const Dims& d = a.d;
  const int64_t ranges = (d.Hkv + a.G - 1) / a.G;
  for_each_item(ec, d.B * ranges, [&](int64_t item, int thread) {
    const int64_t b = item / ranges, g0 = (item % ranges) * a.G;
    Carve c{l.scratches + thread * l.per_thread};
    f(Item{b, g0, std::min(a.G, d.Hkv - g0), 0}, Scratch::carve(c, d, a.dt, a.G, backward));
  });
}

}  // namespace

void short_attention_forward(const ExecContext& ec, const Tensor& qkv, const AttentionConfig& cfg,
                             Tensor& out, AttentionSaved& saved, AttentionWorkspace& ws) {
  const Dims d = detail::attention_dims(qkv, cfg);
  ensure(ec, saved.probs, {d.B, d.H, d.T, d.T}, DType::f32);
  Args a{.d = d,
         .cfg = cfg,
         .dt = qkv.dtype(),
         .qkv = qkv,
         .out = out,
         .probs = saved.probs.data<float>(),
         .lse = saved.lse.data<float>(),
         .dout = nullptr,
         .dqkv = nullptr,
         .dense = {},
         .G = heads_per_item(d, ec.threads())};
  const Layout l = layout(ec, a, ws, 3, false);
  if (copies_heads(a.dt)) {
    pack_heads(ec, qkv, d, {{0, l.copy[0]}, {1, l.copy[1]}, {2, l.copy[2]}});
    for (int i = 0; i < 3; ++i) a.dense[i] = l.copy[i];
  }
  detail::dispatch_float(a.dt, [&]<typename T>() {
    for_each_range(ec, a, l, false, [&](Item it, const Scratch& s) {
      for (it.blk = 0; it.blk < d.H / d.Hkv; ++it.blk) forward_item<T>(a, it, s);
    });
  });
}

void short_attention_backward(const ExecContext& ec, const Tensor& dout, const Tensor& qkv,
                              const AttentionSaved& saved, const AttentionConfig& cfg, Tensor& dqkv,
                              AttentionWorkspace& ws) {
  const Dims d = detail::attention_dims(qkv, cfg);
  Args a{.d = d,
         .cfg = cfg,
         .dt = qkv.dtype(),
         .qkv = qkv,
         .out = saved.out,
         .probs = const_cast<float*>(saved.probs.data<float>()),
         .lse = nullptr,
         .dout = &dout,
         .dqkv = &dqkv,
         .dense = {},
         .G = heads_per_item(d, ec.threads())};
  const Layout l = layout(ec, a, ws, 4, true);
  if (copies_heads(a.dt)) {
    pack_heads(ec, qkv, d, {{0, l.copy[0]}, {1, l.copy[1]}, {2, l.copy[2]}});
    pack_heads(ec, dout, d, {{0, l.copy[3]}});
    for (int i = 0; i < 4; ++i) a.dense[i] = l.copy[i];
  }
  detail::dispatch_float(a.dt, [&]<typename T>() {
    for_each_range(ec, a, l, true, [&](Item it, const Scratch& s) {
      for (it.blk = 0; it.blk < d.H / d.Hkv; ++it.blk) backward_item<T>(a, it, s);
      if (a.dt == DType::bf16) store_kv_grads(a, it, s);
    });
  });
}

}  // namespace weft::kernels::cpu::attention_blocks
