#include "weft/kernels/impl/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "weft/core/exec_context.h"
#include "weft/kernels/cpu/attention_blocks.h"
#include "weft/kernels/cpu/attention_rows.h"
#include "weft/kernels/elementwise.h"
#include "weft/kernels/random.h"

// The forward of the fused CPU attention and the dropout mask; the backward
// is cpu/attention_backward.cpp.

namespace weft::kernels::impl {

namespace {

using namespace cpu::attention_blocks;
using namespace cpu::attention_rows;
using detail::from_f32;
using detail::to_f32;

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

// e^(s - max) over row sr of n scores of which the first `seen` are visible,
// raising *max first; returns their sum and leaves the masked ones 0. The
// masked scores go in as -inf so that the exponentials run over whole
// vectors: each gives e^-87 rather than 0, which the row's sum (at least 1
// once the row's maximum joins it) absorbs, and is zeroed after.
inline float exp_visible(float* sr, int64_t seen, int64_t n, float* max) {
  if (seen == 0) {
    std::fill(sr, sr + n, 0.0f);
    return 0.0f;
  }
  std::fill(sr + seen, sr + n, -std::numeric_limits<float>::infinity());
  const float sum = exp_row_online(sr, n, max);
  std::fill(sr + seen, sr + n, 0.0f);
  return sum;
}

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
  const int64_t key_end = cfg.causal ? std::min(d.T, q0 + m + position_shift(cfg)) : d.T;
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
      const float sum = exp_visible(sr, seen, n, &max);
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
    T* orow = reinterpret_cast<T*>(o.data) + (q0 + r) * o.ld;
    scaled_row(s.acc + r * d.D, 1.0f / s.sum[r], reinterpret_cast<Raw<T>*>(orow), d.D);
    a.lse[bh * d.T + q0 + r] = s.max[r] + std::log(s.sum[r]);
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
  saved.kernels = "cpu";
  if (d.B * d.T == 0) return;
  if (short_path(d)) return short_attention_forward(ec, qkv, cfg, out, saved, workspace);
  saved.probs = Tensor();

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
