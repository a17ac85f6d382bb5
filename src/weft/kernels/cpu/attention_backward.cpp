#include <algorithm>
#include <cmath>
#include <type_traits>

#include "weft/core/exec_context.h"
#include "weft/kernels/cpu/attention_blocks.h"
#include "weft/kernels/cpu/attention_rows.h"
#include "weft/kernels/elementwise.h"
#include "weft/kernels/impl/attention.h"
#include "weft/kernels/random.h"

// The backward of the fused CPU attention (the forward: cpu/attention.cpp).

namespace weft::kernels::impl {

namespace {

using namespace cpu::attention_blocks;
using namespace cpu::attention_rows;
using detail::from_f32;
using detail::to_f32;

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
    scaled_row(src + r * D, scale, reinterpret_cast<Raw<T>*>(row), D);
  }
}

// delta[t] = Σ_c dO·O over the D columns of every row t < rows of a head.
template <typename T>
void row_deltas(const Head& o, const Head& g, int64_t rows, int64_t D, float* delta) {
  for (int64_t t = 0; t < rows; ++t) {
    delta[t] = dot_row(reinterpret_cast<const Raw<T>*>(o.data) + t * o.ld,
                       reinterpret_cast<const Raw<T>*>(g.data) + t * g.ld, D);
  }
}

// dS = P ∘ (dP·mask·keep_scale - delta) of the (m, n) block of query rows q0
// on, P at p (leading dimension n): bf16 into s.ds, or f32 over s.dp.
void softmax_grads(const BackwardScratch& s, const float* p, int64_t q0, int64_t m, int64_t n,
                   float keep_scale, bool dropout, bool bf16) {
  for (int64_t r = 0; r < m; ++r) {
    const float delta = s.delta[q0 + r];
    const float* pr = p + r * n;
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

// What multiplies dO for the (m, n) block of query rows q0 and keys k0 of
// head bh, from its probabilities P at p (leading dimension n) into s.w:
// with dropout P·keep/(1-p), the decisions in s.keep; in bf16 P rounded; in
// f32 without dropout nothing (P itself).
template <typename T>
void block_weights(const BackwardArgs& a, int64_t bh, const float* p, int64_t q0, int64_t m,
                   int64_t k0, int64_t n, const BackwardScratch& s) {
  const AttentionConfig& cfg = a.cfg;
  const bool dropout = cfg.dropout > 0.0f;
  if (!separate_weights(a.dt, cfg)) return;
  const float keep_scale = 1.0f / (1.0f - cfg.dropout);
  T* w = reinterpret_cast<T*>(s.w);
  for (int64_t r = 0; r < m; ++r) {
    const float* pr = p + r * n;
    T* wr = w + r * n;
    if (dropout) {
      uint8_t* kr = s.keep + r * n;
      for_each_uniform(cfg.seed, dropout_counter(cfg, a.d.T, bh, q0 + r, k0), n,
                       [&](int64_t j, float u) {
                         kr[j] = u >= cfg.dropout;
                         wr[j] = from_f32<T>(kr[j] ? pr[j] * keep_scale : 0.0f);
                       });
    } else {
      bf16_row(pr, reinterpret_cast<uint16_t*>(wr), n);  // T is bf16 here
    }
  }
}

// P = e^(Q·Kᵀ/√D - lse) of the (m, n) block of query rows q0 and keys k0 of
// head bh into s.p (0 where masked), and its weights (block_weights). The
// exponentials run over whole rows (vectors) and the masked ones are zeroed.
template <typename T>
void block_probabilities(const BackwardArgs& a, int64_t bh, const Head& q, const Head& k,
                         int64_t q0, int64_t m, int64_t k0, int64_t n, const BackwardScratch& s) {
  const Dims& d = a.d;
  const float* lse = a.lse + bh * d.T;
  product(rows_of(q, a.dt, q0, m, d.D), rows_of(k, a.dt, k0, n, d.D, true),
          matrix(s.p, DType::f32, m, n, n), 1.0f / std::sqrt(static_cast<float>(d.D)));
  for (int64_t r = 0; r < m; ++r) {
    const int64_t t = q0 + r, seen = visible(a.cfg, t, k0, n);
    float* pr = s.p + r * n;
    exp_row(pr, n, lse[t]);
    std::fill(pr + seen, pr + n, 0.0f);
  }
  block_weights<T>(a, bh, s.p, q0, m, k0, n, s);
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
    for (int64_t q0 = first_query(cfg, k0); q0 < d.T; q0 += kBackwardQueryBlock) {
      const int64_t m = std::min(kBackwardQueryBlock, d.T - q0);
      const int64_t n = keys_seen(cfg, q0, m, k0, n_block);
      block_probabilities<T>(a, bh, q, k, q0, m, k0, n, s);
      // dV += weightsᵀ·dO
      product(separate ? matrix(s.w, dt, n, m, n, true) : matrix(s.p, DType::f32, n, m, n, true),
              rows_of(dout, dt, q0, m, D), matrix(dv, DType::f32, n, D, D), 1.0f, true);
      // dP = dO·Vᵀ; dS = P ∘ (dP·mask/(1-p) - Σ_k dO·O)
      product(rows_of(dout, dt, q0, m, D), rows_of(v, dt, k0, n, D, true),
              matrix(s.dp, DType::f32, m, n, n));
      softmax_grads(s, s.p, q0, m, n, keep_scale, dropout, bf16);
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
void attention_backward<Backend::cpu>(const ExecContext& ec, const Tensor& dout, const Tensor& qkv,
                                      const AttentionSaved& saved, const AttentionConfig& cfg,
                                      Tensor& dqkv, AttentionWorkspace& workspace) {
  const Dims d = detail::attention_dims(qkv, cfg);
  const DType dt = qkv.dtype();
  if (d.B * d.T == 0) return;
  const Shape probs{d.B, d.H, d.T, d.T};
  WEFT_CHECK(!short_path(d) || (saved.probs.defined() && saved.probs.shape() == probs &&
                                saved.probs.dtype() == DType::f32),
             "attention backward on {} positions needs the probabilities f32 {} that the CPU "
             "forward of the same qkv keeps for sequences of at most {} positions",
             d.T, probs, kShortSeq);
  if (short_path(d)) return short_attention_backward(ec, dout, qkv, saved, cfg, dqkv, workspace);

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

}  // namespace weft::kernels::impl
