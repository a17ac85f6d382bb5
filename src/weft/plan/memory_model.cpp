#include "weft/plan/memory_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "weft/core/error.h"
#include "weft/nn/embedding.h"

namespace weft::plan {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// A GTP shard of a weight of `rows` x `cols`: rows split over g ranks, each
// rank's rows a multiple of 16 (parallel/gtp/options.h's alignment).
int64_t gtp_shard(int64_t rows, int64_t cols, int g) {
  if (g <= 1) return rows * cols;
  return round_up(ceil_div(rows, g), 16) * cols;
}

}  // namespace

std::vector<int64_t> stage_layers(int64_t layers, int pp) {
  WEFT_CHECK(pp >= 1, "pipeline size must be at least 1, got {}", pp);
  if (pp > 2 && layers % pp != 0 && (layers + 2) % pp == 0) {
    // The embedding and the head each count as a layer (Megatron's
    // account-for-embedding/loss split, Llama 3 405B's 126 layers on 16
    // stages): the first and the last stage hold one layer fewer.
    std::vector<int64_t> out(static_cast<size_t>(pp), (layers + 2) / pp);
    --out.front();
    --out.back();
    return out;
  }
  std::vector<int64_t> out(static_cast<size_t>(pp), layers / pp);
  for (int64_t i = 0; i < layers % pp; ++i) ++out[static_cast<size_t>(i)];
  return out;
}

double micro_batches_in_flight(const Layout& l, int stage) {
  const auto m = static_cast<double>(l.grad_accum);
  if (l.pp <= 1) return 1.0;
  const double p = l.pp, s = stage;
  switch (l.schedule) {
    case PipelineSchedule::gpipe: return m;
    case PipelineSchedule::one_f_one_b:
    case PipelineSchedule::zero_bubble: return std::min(p - s, m);
    case PipelineSchedule::interleaved: {
      const double v = l.vpp;
      const double chunks = std::min((p - s - 1) * 2 + (v - 1) * p + 1, m * v);
      return chunks / v;
    }
  }
  return m;
}

MemoryModel::MemoryModel(Workload workload) : w_(std::move(workload)) {}

ParameterCount MemoryModel::parameters(const Layout& l, int stage) const {
  const nn::GptConfig& m = w_.model;
  const int64_t c = m.width, d = m.width / m.heads, t = l.tp;
  const bool norm_bias = m.bias && m.norm == nn::NormKind::layer;
  const int64_t norm = norm_bias ? 2 * c : c;
  const int64_t norm_tensors = norm_bias ? 2 : 1;
  const int64_t vp = nn::padded_vocab_size(m.vocab, m.vocab_pad);
  const int64_t heads = m.heads / t;
  const int64_t kv = std::max<int64_t>(m.kv_head_count() / t, 1);
  const int64_t qkv_rows = (heads + 2 * kv) * d;
  const int64_t hidden = m.mlp_hidden();
  const int64_t fc1_rows = (m.mlp == nn::MlpKind::swiglu ? 2 : 1) * hidden / t;
  const int g = l.gtp;
  const std::vector<int64_t> per_stage = stage_layers(m.layers, l.pp);
  int64_t first = 0;
  for (int s = 0; s < stage; ++s) first += per_stage[static_cast<size_t>(s)];
  const int64_t count = per_stage[static_cast<size_t>(stage)];

  ParameterCount p;
  auto weight = [&](int64_t rows, int64_t cols) {
    p.sharded += gtp_shard(rows, cols, g);
    ++p.tensors;
  };
  auto replicated = [&](int64_t n, int64_t tensors) {
    p.replicated += n;
    p.tensors += tensors;
  };
  const bool last = stage == l.pp - 1;
  if (stage == 0) {
    weight(vp / t, c);
    if (m.positions == nn::PositionKind::learned) replicated(m.seq * c, 1);
  }
  for (int64_t i = first; i < first + count; ++i) {
    replicated(2 * norm, 2 * norm_tensors);
    weight(qkv_rows, c);
    weight(c, c / t);
    if (m.bias) replicated(qkv_rows + c, 2);
    if (m.moe_layer(i)) {
      // The router (replicated) and this rank's experts (expert parallelism
      // splits them; the first ranks take the remainder).
      weight(m.moe_experts, c);
      const int64_t experts = ceil_div(m.moe_experts, l.ep);
      for (int64_t e = 0; e < experts; ++e) {
        weight(fc1_rows, c);
        weight(c, hidden / t);
      }
    } else {
      weight(fc1_rows, c);
      weight(c, hidden / t);
      if (m.bias) replicated(fc1_rows + c, 2);
    }
  }
  if (last) {
    replicated(norm, norm_tensors);
    // An untied head, or under pp > 1 the last stage's copy of a tied wte.
    if (!m.tied_head || l.pp > 1) weight(vp / t, c);
  }
  return p;
}

int64_t MemoryModel::residual_rows(const Layout& l) const {
  const int64_t n = l.micro_batch * w_.model.seq / l.cp;
  return l.sp == parallel::SequenceParallel::off ? n : ceil_div(n, l.tp);
}

int64_t MemoryModel::region_rows(const Layout& l) const {
  return l.micro_batch * w_.model.seq / l.cp;
}

int64_t MemoryModel::layer_activations(const Layout& l, bool moe, Recompute mode) const {
  const nn::GptConfig& m = w_.model;
  const int64_t e = dtype_storage_bytes(w_.compute, 1);
  const int64_t r = residual_rows(l), n = region_rows(l);
  const int64_t c = m.width, t = l.tp, d = m.width / m.heads;
  if (mode == Recompute::full) return r * c * e;  // the layer's input alone
  const int64_t heads = m.heads / t;
  const int64_t kv = std::max<int64_t>(m.kv_head_count() / t, 1);
  const int64_t stats = (m.norm == nn::NormKind::layer ? 2 : 1) * r * 4;
  // The two residual sums and the two norm outputs (each norm's input and
  // the following Linear's input), the norms' statistics.
  int64_t bytes = 4 * r * c * e + 2 * stats;
  // qkv (saved by attention), the attention output (saved by proj), the
  // softmax's log-sum-exp per head and row.
  bytes += n * (heads + 2 * kv) * d * e + n * heads * d * e;
  if (mode == Recompute::none) bytes += n * heads * 4;
  // The CPU's attention keeps the probabilities of sequences up to 128
  // (kernels/attention.h); selective recomputation drops the attention core.
  const int64_t seq = m.seq / l.cp;
  if (!w_.gpu && seq <= 128 && mode == Recompute::none) {
    bytes += n / seq * heads * seq * seq * 4;
  }
  if (m.dropout > 0.0f) bytes += 2 * r * c;  // the residual dropout masks (u8)
  const int64_t hidden = m.mlp_hidden() / t;
  const int64_t fc1 = (m.mlp == nn::MlpKind::swiglu ? 2 : 1) * hidden;
  if (!moe) return bytes + n * (fc1 + hidden) * e;
  // MoE: every token goes to top_k experts: the dispatched rows in expert
  // order, fc1's output and activation, fc2's output, and the router's
  // logits and probabilities (f32).
  const int64_t routed = n * m.moe_top_k;
  return bytes + routed * (2 * c + fc1 + hidden) * e + 3 * n * m.moe_experts * 4;
}

int64_t MemoryModel::outside_layers_activations(const Layout& l, int stage) const {
  const nn::GptConfig& m = w_.model;
  const int64_t e = dtype_storage_bytes(w_.compute, 1);
  const int64_t r = residual_rows(l), n = region_rows(l);
  int64_t bytes = 0;
  if (stage == 0) bytes += n * 4;  // token ids
  if (stage == l.pp - 1) {
    const int64_t vp = nn::padded_vocab_size(m.vocab, m.vocab_pad);
    // ln_f's sum and output, the logits (this rank's vocabulary slice, in the
    // compute type), the loss's log-sum-exp, the targets.
    bytes += 2 * r * m.width * e + n * (vp / l.tp) * e + 2 * n * 4;
  }
  return bytes;
}

int64_t MemoryModel::transient(const Layout& l, int stage) const {
  const nn::GptConfig& m = w_.model;
  const int64_t e = dtype_storage_bytes(w_.compute, 1);
  const int64_t n = region_rows(l);
  const int64_t c = m.width;
  // The backward's working set at one layer: the incoming and outgoing
  // gradients of the residual stream and the largest branch gradient (fc1's
  // output gradient).
  const int64_t hidden = (m.mlp == nn::MlpKind::swiglu ? 2 : 1) * m.mlp_hidden() / l.tp;
  int64_t bytes = 2 * n * c * e + n * hidden * e;
  // Below f32 the Linear backward keeps the output gradient in f32 too for
  // the weight gradient and the bias (Linear::Grads::dy_hp), and its
  // conversion: two f32 copies of fc1's output gradient.
  if (e < 4) bytes += 2 * n * hidden * 4;
  if (stage == l.pp - 1) {
    // The head's backward: the cross-entropy's per-row sums and the input
    // gradient beside the logits.
    bytes = std::max(bytes, 3 * n * 4 + n * c * e);
  }
  return bytes;
}

MemoryBreakdown MemoryModel::rank(const Layout& l, int stage) const {
  WEFT_CHECK(stage >= 0 && stage < l.pp, "stage {} of a {}-stage pipeline", stage, l.pp);
  const nn::GptConfig& m = w_.model;
  const ParameterCount p = parameters(l, stage);
  const int64_t e = dtype_storage_bytes(w_.compute, 1);
  MemoryBreakdown b;
  b.parameters = 4 * p.total();
  b.gradients = 4 * p.total();
  // Each parameter's moment stretch is padded to 16 elements: on average 7.5
  // elements per tensor.
  const int64_t moments = 2 * 4 * (p.total() + 8 * p.tensors);
  b.optimizer = l.distributed_optimizer ? ceil_div(moments, int64_t{l.dp} * l.cp) : moments;
  // Activations: the saved state of the micro-batches in flight.
  const std::vector<int64_t> per_stage = stage_layers(m.layers, l.pp);
  int64_t first = 0;
  for (int s = 0; s < stage; ++s) first += per_stage[static_cast<size_t>(s)];
  const int64_t count = per_stage[static_cast<size_t>(stage)];
  const int64_t recomputed =
      l.recompute == Recompute::full
          ? (l.recompute_layers > 0 ? std::min(l.recompute_layers, count) : count)
          : 0;
  int64_t per_micro = outside_layers_activations(l, stage);
  int64_t largest_layer = 0;
  for (int64_t i = first; i < first + count; ++i) {
    const bool moe = m.moe_layer(i);
    const Recompute mode = i - first < recomputed                ? Recompute::full
                           : l.recompute == Recompute::selective ? Recompute::selective
                                                                 : Recompute::none;
    per_micro += layer_activations(l, moe, mode);
    largest_layer = std::max(largest_layer, layer_activations(l, moe, Recompute::none));
  }
  const double in_flight = micro_batches_in_flight(l, stage);
  b.activations = static_cast<int64_t>(std::llround(in_flight * static_cast<double>(per_micro))) +
                  transient(l, stage);
  // A fully recomputed layer's activations exist again during its backward.
  if (recomputed > 0) b.activations += largest_layer;
  // Workspaces: under sequence parallelism the gathered input of the
  // column-parallel GEMMs and the unreduced output of the row-parallel ones
  // (one buffer per role, the largest request); the rotary tables.
  const int64_t n = region_rows(l);
  if (l.tp > 1 && l.sp != parallel::SequenceParallel::off) b.workspaces += 2 * n * m.width * e;
  if (m.positions == nn::PositionKind::rotary)
    b.workspaces += count * m.seq * (m.width / m.heads) * 4;
  // The quantized recipes on the CPU multiply dequantized f32 operands: one
  // workspace buffer per operand role (input, weight, output gradient; row-
  // and column-wise), each as large as its largest request.
  if (w_.quantized) {
    const int64_t d = m.width / m.heads;
    const int64_t qkv = (m.heads / l.tp + 2 * std::max<int64_t>(m.kv_head_count() / l.tp, 1)) * d;
    const int64_t fc1 = (m.mlp == nn::MlpKind::swiglu ? 2 : 1) * m.mlp_hidden() / l.tp;
    const int64_t widest = std::max({qkv, fc1, m.width});
    b.workspaces += 4 * (2 * n * widest + 2 * n * m.width + 2 * widest * m.width);
  }
  // Context parallelism: the ring's K/V send and receive buffers.
  if (l.cp > 1) {
    const int64_t kv = std::max<int64_t>(m.kv_head_count() / l.tp, 1) * (m.width / m.heads);
    b.comm_buffers += 2 * 2 * n * kv * e;
  }
  // Weight cache: the compute-dtype casts of the weights (bf16), or GTP's
  // gathered weights: gtp_cache layers' worth.
  if (l.gtp > 1) {
    // GTP: the gathered weights of gtp_cache layers and the one being
    // gathered behind them, and the head's (compute dtype); during a
    // layer's backward its full f32 weight gradient, before the
    // reduce-scatter into the shard.
    const ParameterCount whole = MemoryModel(w_).parameters(
        Layout{.tp = l.tp, .pp = l.pp, .ep = l.ep, .micro_batch = 1}, stage);
    const int64_t vp = nn::padded_vocab_size(m.vocab, m.vocab_pad);
    int64_t tables = 0;
    if (stage == 0) tables += vp / l.tp * m.width;
    if (stage == l.pp - 1 && (!m.tied_head || l.pp > 1)) tables += vp / l.tp * m.width;
    const int64_t per_layer = (whole.sharded - tables) / std::max<int64_t>(count, 1);
    const int64_t head = stage == l.pp - 1 ? vp / l.tp * m.width : 0;
    b.weight_cache = ((std::min<int64_t>(w_.gtp_cache, count) + 1) * per_layer + head) * e;
    b.gradients += w_.gtp_grad_accum_full ? 4 * whole.sharded : 4 * std::max(per_layer, head);
  } else if (w_.compute != DType::f32) {
    b.weight_cache = p.sharded * e;
  }
  return b;
}

MemoryBreakdown MemoryModel::peak(const Layout& l, int* stage) const {
  MemoryBreakdown best;
  for (int s = 0; s < l.pp; ++s) {
    const MemoryBreakdown b = rank(l, s);
    if (s == 0 || b.total() > best.total()) {
      best = b;
      if (stage) *stage = s;
    }
  }
  return best;
}

std::string format_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = b;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  if (u == 0) return format("{:.0f} {}", v, units[u]);
  return format("{:.1f} {}", v, units[u]);
}

int64_t parse_memory_size(const std::string& text, const std::string& option) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  std::string lower;
  for (char ch : unit) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  double scale = 0;
  const std::pair<const char*, double> units[] = {{"", 1},
                                                  {"b", 1},
                                                  {"k", 1024.0},
                                                  {"kib", 1024.0},
                                                  {"kb", 1e3},
                                                  {"m", 1048576.0},
                                                  {"mib", 1048576.0},
                                                  {"mb", 1e6},
                                                  {"g", 1 << 30},
                                                  {"gib", 1 << 30},
                                                  {"gb", 1e9},
                                                  {"t", 1099511627776.0},
                                                  {"tib", 1099511627776.0},
                                                  {"tb", 1e12}};
  for (const auto& [name, s] : units)
    if (lower == name) scale = s;
  WEFT_CHECK(used > 0 && scale > 0 && v > 0 && std::isfinite(v),
             "{} {}: give a size such as 40GiB, 512MiB, 80GB or a number of bytes", option, text);
  return static_cast<int64_t>(v * scale);
}

}  // namespace weft::plan
