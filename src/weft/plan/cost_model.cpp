#include "weft/plan/cost_model.h"

#include <algorithm>
#include <cmath>

#include "weft/nn/embedding.h"

namespace weft::plan {

namespace {

// Bytes of the residual stream and of the MLP's hidden activation that the
// memory-bound passes of one layer read and write per token, forward and
// backward: two norms (read the sum, write the output and the sum: 3 passes
// forward, 4 backward, each), two residual adds and their gradients (3 + 3),
// dropout where it runs; the activation function on the hidden width (2
// forward, 3 backward) and the gradient accumulations of the GEMMs' inputs.
constexpr double kResidualPasses = 24;
constexpr double kHiddenPasses = 6;
// AdamW reads the value, gradient and two moments and writes three of them
// (7 f32 per parameter); the gradient norm reads each gradient and the next
// step's zeroing writes it (2 more).
constexpr double kOptimizerBytesPerParameter = 9 * 4;
// Kernel calls of one layer outside its GEMMs, forward and backward: two
// norms, two residual adds, the activation, rotary positions, attention,
// the bias and dropout passes, the gradients' conversions and sums.
constexpr double kLayerKernels = 24;

struct Group {
  int size = 1;
  int stride = 1;  // ranks between consecutive members (the product of faster dimensions)
};

double bandwidth(const Machine& m, const Group& g) {
  if (g.size <= 1) return 1.0;
  const bool intra = static_cast<int64_t>(g.stride) * g.size <= m.ranks_per_node;
  return intra ? m.intra_bandwidth : m.inter_bandwidth;
}

// Ring all-reduce of `bytes` over `g`: 2(n-1)/n of them cross the link.
double all_reduce_s(const Machine& m, const Group& g, double bytes) {
  if (g.size <= 1) return 0;
  return m.latency_s + 2.0 * (g.size - 1) / g.size * bytes / bandwidth(m, g);
}
// All-gather or reduce-scatter of `bytes` (the whole buffer) over `g`.
double gather_s(const Machine& m, const Group& g, double bytes) {
  if (g.size <= 1) return 0;
  return m.latency_s + static_cast<double>(g.size - 1) / g.size * bytes / bandwidth(m, g);
}

double gemm_s(const Machine& m, double rows, double cols, double inner) {
  const double f = 2.0 * rows * cols * inner;
  if (f <= 0) return 0;
  return f / m.gemm_rate(f);
}

}  // namespace

StepCost predict_step(const Workload& w, const Layout& l, const Machine& mc) {
  const nn::GptConfig& m = w.model;
  const MemoryModel memory(w);
  const double e = static_cast<double>(dtype_storage_bytes(w.compute, 1));
  const double c = static_cast<double>(m.width);
  const double t = l.tp;
  const double seq = static_cast<double>(m.seq);
  const double n = static_cast<double>(l.micro_batch) * seq / l.cp;  // rows per micro-batch
  const double r = l.sp == parallel::SequenceParallel::off ? n : n / t;
  const double d = c / static_cast<double>(m.heads);
  const double heads = static_cast<double>(m.heads) / t;
  const double kv = std::max(1.0, std::floor(static_cast<double>(m.kv_head_count()) / t));
  const double qkv_rows = (heads + 2 * kv) * d;
  const double hidden = static_cast<double>(m.mlp_hidden()) / t;
  const double fc1_rows = (m.mlp == nn::MlpKind::swiglu ? 2 : 1) * hidden;
  const double vp = static_cast<double>(nn::padded_vocab_size(m.vocab, m.vocab_pad)) / t;
  const double mb = static_cast<double>(l.grad_accum);

  // The groups, tp fastest (weft's grid order and Megatron's).
  const Group tp{l.tp, 1};
  const Group cp{l.cp, l.tp};
  const Group ep{l.ep, l.tp * l.cp};
  const Group gtp{l.gtp, l.tp * l.cp * l.ep};
  const Group pp{l.pp, l.tp * l.cp * l.ep * l.gtp};
  const Group data{l.dp * l.cp * l.ep * l.gtp, l.tp};  // gradients of replicated weights
  const Group dp_only{l.dp, l.tp * l.cp * l.ep * l.gtp * l.pp};

  // Whether communication can hide behind compute: a GPU's collectives run
  // on their own streams and links; the local backend's are copies made by
  // the same cores that compute (on this CPU nothing overlaps).
  const double hide = mc.gpu ? 1.0 : 0.0;
  const std::vector<int64_t> layers = stage_layers(m.layers, l.pp);
  StepCost worst;
  int64_t first = 0;
  for (int s = 0; s < l.pp; ++s) {
    StepCost sc;
    const int64_t count = layers[static_cast<size_t>(s)];
    const int64_t recomputed =
        l.recompute == Recompute::full
            ? (l.recompute_layers > 0 ? std::min(l.recompute_layers, count) : count)
            : 0;
    double micro_compute = 0, micro_tp = 0, micro_cp = 0, micro_ep = 0, micro_gtp = 0;
    for (int64_t i = first; i < first + count; ++i) {
      const bool moe = m.moe_layer(i);
      // GEMMs: forward, input gradient, weight gradient.
      double fwd = gemm_s(mc, n, qkv_rows, c) + gemm_s(mc, n, c, heads * d);
      double weights = (qkv_rows * c + c * heads * d) * e;
      double ep_bytes = 0;
      if (moe) {
        const double experts = std::ceil(static_cast<double>(m.moe_experts) / l.ep);
        // Every rank's tokens reach top_k experts: n·top_k rows over this
        // rank's experts, balanced.
        const double rows = n * static_cast<double>(m.moe_top_k) / experts;
        fwd += gemm_s(mc, n, static_cast<double>(m.moe_experts), c);
        fwd += experts * (gemm_s(mc, rows, fc1_rows, c) + gemm_s(mc, rows, c, hidden));
        weights += experts * (fc1_rows * c + c * hidden) * e;
        ep_bytes = n * static_cast<double>(m.moe_top_k) * c * e;
      } else {
        fwd += gemm_s(mc, n, fc1_rows, c) + gemm_s(mc, n, c, hidden);
        weights += (fc1_rows * c + c * hidden) * e;
      }
      // Causal attention: QKᵀ and PV over half the square, per local head;
      // the backward does 2.5 times the forward.
      const double attn_flops = 2.0 * n * seq * heads * d;
      const double attn_fwd = attn_flops / mc.attention_flops;
      const bool full = i - first < recomputed;
      const bool selective = !full && l.recompute == Recompute::selective;
      const double gemm = fwd * (full ? 4.0 : 3.0);
      const double attn = attn_fwd * (full || selective ? 4.5 : 3.5);
      const double mem =
          ((kResidualPasses * r * c * e + kHiddenPasses * n * hidden * e) / mc.memory_bandwidth +
           kLayerKernels * mc.op_overhead_s) *
          (full ? 4.0 / 3.0 : 1.0);
      sc.gemm += gemm * mb;
      sc.attention += attn * mb;
      sc.memory_bound += mem * mb;
      const double layer_compute = gemm + attn + mem;
      micro_compute += layer_compute;
      // Tensor parallelism: two collectives of the residual stream forward
      // and two backward (all-reduces, or all-gathers and reduce-scatters of
      // the same volume under sequence parallelism); a full recomputation
      // repeats the forward's.
      const double s_bytes = n * c * e;
      micro_tp += (full ? 6 : 4) * all_reduce_s(mc, tp, s_bytes);
      // Context parallelism: the ring passes each K/V block cp-1 times
      // forward; backward passes K/V and their gradients. It overlaps the
      // blocks' attention.
      if (l.cp > 1) {
        const double kv_bytes = 2 * n * kv * d * e;
        const double ring = 3.0 * (l.cp - 1) * (mc.latency_s + kv_bytes / bandwidth(mc, cp));
        micro_cp += std::max(0.0, ring - hide * attn);
      }
      // Expert parallelism: dispatch and combine, forward and backward.
      if (moe && l.ep > 1) micro_ep += 4 * gather_s(mc, ep, ep_bytes);
      // GTP: the weights gathered for forward and backward, the gradients
      // reduce-scattered (f32), behind the previous layer's compute.
      if (l.gtp > 1) {
        const double comm = 2 * gather_s(mc, gtp, weights) + gather_s(mc, gtp, weights / e * 4);
        micro_gtp += std::max(0.0, comm - hide * layer_compute);
      }
    }
    // The embedding (first stage) and the head and loss (last stage).
    if (s == 0) {
      micro_compute += 2 * r * c * e / mc.memory_bandwidth;
      micro_tp += 2 * all_reduce_s(mc, tp, n * c * e);
    }
    if (s == l.pp - 1) {
      const double head = 3 * gemm_s(mc, n, vp, c);
      const double loss = 4 * n * vp * e / mc.memory_bandwidth;
      sc.gemm += head * mb;
      sc.memory_bound += loss * mb;
      micro_compute += head + loss;
      micro_tp += 2 * all_reduce_s(mc, tp, n * c * e);
    }
    // Pipeline: the activation and its gradient to the neighbours.
    const double micro_pp = l.pp > 1 ? 2 * (mc.latency_s + r * c * e / bandwidth(mc, pp)) : 0;
    sc.tp_comm = micro_tp * mb;
    sc.cp_comm = micro_cp * mb;
    sc.ep_comm = micro_ep * mb;
    sc.gtp_comm = micro_gtp * mb;
    sc.pp_comm = micro_pp * mb;
    const double micro = micro_compute + micro_tp + micro_cp + micro_ep + micro_gtp + micro_pp;
    if (l.pp > 1) {
      const double p = l.pp;
      switch (l.schedule) {
        case PipelineSchedule::gpipe:
        case PipelineSchedule::one_f_one_b: sc.bubble = (p - 1) * micro; break;
        case PipelineSchedule::interleaved: sc.bubble = (p - 1) * micro / l.vpp; break;
        case PipelineSchedule::zero_bubble: sc.bubble = (p - 1) * micro / 3; break;
      }
    }
    // Data parallelism: the f32 gradients averaged (reduce-scattered and the
    // weights all-gathered under the distributed optimizer: the same
    // volume) behind the last micro-batch's backward; the last bucket is
    // exposed in any case.
    const ParameterCount params = memory.parameters(l, s);
    const double grad_bytes = 4.0 * static_cast<double>(params.total());
    const double dp_total = all_reduce_s(mc, data.size > 1 ? data : dp_only, grad_bytes);
    const double bucket = std::min(grad_bytes, w.bucket_mb * (1 << 20));
    const double last_bucket = grad_bytes > 0 ? dp_total * bucket / grad_bytes : 0;
    sc.dp_comm = std::max(last_bucket, dp_total - hide * micro_compute * 2.0 / 3.0);
    // The optimizer step over this rank's parameters (its shard under the
    // distributed optimizer), and the bf16 casts of the weights.
    double opt_params = static_cast<double>(params.total());
    if (l.distributed_optimizer) opt_params /= static_cast<double>(l.dp * l.cp);
    sc.optimizer = (opt_params * kOptimizerBytesPerParameter +
                    (w.compute == DType::f32 ? 0.0 : 6.0 * static_cast<double>(params.sharded))) /
                   mc.memory_bandwidth;
    sc.total = micro * mb + sc.bubble + sc.dp_comm + sc.optimizer;
    if (s == 0 || sc.total > worst.total) worst = sc;
    first += count;
  }
  worst.tokens_per_s = static_cast<double>(l.global_batch()) * seq / worst.total;
  // MFU's FLOPs: 6 per GEMM parameter (the head included, the embedding
  // table and positions not; a MoE layer's active experts), attention 6·L·T·C.
  double active = 0;
  for (int64_t i = 0; i < m.layers; ++i) {
    const double attn =
        c * (static_cast<double>(m.heads) + 2 * static_cast<double>(m.kv_head_count())) * d + c * c;
    const double mlp =
        ((m.mlp == nn::MlpKind::swiglu ? 3.0 : 2.0) * c * static_cast<double>(m.mlp_hidden()));
    active += attn + (m.moe_layer(i) ? static_cast<double>(m.moe_top_k) * mlp +
                                           static_cast<double>(m.moe_experts) * c
                                     : mlp);
  }
  active += c * static_cast<double>(nn::padded_vocab_size(m.vocab, m.vocab_pad));
  worst.model_flops_per_token = 6.0 * active + 6.0 * static_cast<double>(m.layers) * seq * c;
  if (mc.peak_flops > 0) {
    worst.mfu = worst.tokens_per_s * worst.model_flops_per_token / (l.world() * mc.peak_flops);
  }
  return worst;
}

}  // namespace weft::plan
