#include "weft/nn/attention.h"

#include <algorithm>

#include "weft/core/cuda.h"
#include "weft/parallel/mappings.h"

namespace weft::nn {

MultiheadAttentionConfig MultiheadAttention::checked(MultiheadAttentionConfig cfg, int t) {
  WEFT_CHECK(cfg.width > 0 && cfg.heads > 0,
             "{}: attention needs a positive width and head count, got width {} and {} heads",
             cfg.name, cfg.width, cfg.heads);
  WEFT_CHECK(cfg.width % cfg.heads == 0, "{}: width {} is not divisible by the {} heads", cfg.name,
             cfg.width, cfg.heads);
  WEFT_CHECK(cfg.partition == Partition::replicate || cfg.heads % t == 0,
             "{}: {} attention heads cannot be split over tensor-parallel size {}: each rank "
             "needs whole heads, so the head count must be divisible by the TP size",
             cfg.name, cfg.heads, t);
  if (cfg.kv_heads == 0) cfg.kv_heads = cfg.heads;
  WEFT_CHECK(cfg.kv_heads > 0 && cfg.heads % cfg.kv_heads == 0,
             "{}: {} key/value heads cannot serve {} query heads: kv_heads must divide heads",
             cfg.name, cfg.kv_heads, cfg.heads);
  WEFT_CHECK(
      cfg.partition == Partition::replicate || cfg.kv_heads % t == 0 || t % cfg.kv_heads == 0,
      "{}: {} key/value heads cannot be split over tensor-parallel size {}: each rank "
      "needs whole key/value heads, so kv_heads must be divisible by the TP size "
      "(kv_heads/TP heads per rank) or divide it (each head replicated on TP/kv_heads "
      "ranks)",
      cfg.name, cfg.kv_heads, t);
  WEFT_CHECK(!cfg.rotary || ((cfg.width / cfg.heads) % 2 == 0 && cfg.max_positions > 0),
             "{}: rotary positions need an even head size and a positive position count (head "
             "size {}, {} positions)",
             cfg.name, cfg.width / cfg.heads, cfg.max_positions);
  WEFT_CHECK(cfg.dropout >= 0.0f && cfg.dropout < 1.0f,
             "{}: attention dropout must lie in [0, 1), got {}", cfg.name, cfg.dropout);
  WEFT_CHECK(cfg.layers >= 1, "{}: layers (for the proj init scale) must be >= 1, got {}", cfg.name,
             cfg.layers);
  return cfg;
}

std::shared_ptr<comm::ProcessGroup> kv_share_group(const ParallelContext& pc, int64_t kv_heads) {
  const int t = pc.tp_size();
  if (t <= kv_heads || kv_heads < 1 || t % kv_heads != 0) return nullptr;
  std::vector<std::vector<int>> lists(static_cast<size_t>(kv_heads));
  for (int r = 0; r < t; ++r) lists[static_cast<size_t>(r % kv_heads)].push_back(r);
  return pc.tp->new_subgroups_by_enumeration(lists, "tp-kv");
}

MultiheadAttention::MultiheadAttention(ContextPtr context, MultiheadAttentionConfig cfg)
    : Module(cfg.name),
      pc_(std::move(context)),
      cfg_(checked(std::move(cfg), pc_->tp_size())),
      // The query heads' blocks: H/Hkv, or H/T when KV heads are replicated
      // (rank r's heads r, r + T, ...; see the header).
      proj_(pc_, residual_projection(
                     cfg_.partition == Partition::tensor, cfg_.name + ".proj", cfg_.width,
                     cfg_.width, cfg_.init_std, cfg_.layers, "proj", cfg_.bias,
                     cfg_.heads / std::max<int64_t>(cfg_.kv_heads, pc_->tp_size()))) {
  if (kv_replicas() > 1) {
    WEFT_CHECK(!pc_->gtp_runtime,
               "{}: {} key/value heads over tensor-parallel size {} replicate each head on {} "
               "ranks, which generalized tensor parallelism does not support: use --gtp 1, or "
               "--kv-heads a multiple of --tp",
               cfg_.name, cfg_.kv_heads, tp_size(), kv_replicas());
    if (!cfg_.kv_group) cfg_.kv_group = kv_share_group(*pc_, cfg_.kv_heads);
  }
  build_qkv();
  if (cfg_.rotary) {
    rope_table_ = kernels::rope_table(pc_->exec, cfg_.max_positions, cfg_.width / cfg_.heads,
                                      cfg_.rope_theta);
  }
}

void MultiheadAttention::build_qkv() {
  const Parallel qkv_mode = partitioned() ? Parallel::column : Parallel::none;
  const int64_t d = cfg_.width / cfg_.heads;
  // H/Hkv query blocks, k and v: equal blocks of Hkv·D rows (see the header).
  const int64_t blocks = cfg_.heads / cfg_.kv_heads + 2;
  const int64_t out = blocks * cfg_.kv_heads * d;
  // Replicated KV heads: Hkv positions, the query blocks dealt among the
  // ranks that share a position, k and v common to them.
  const bool shared = kv_replicas() > 1;
  const int positions = shared ? static_cast<int>(cfg_.kv_heads) : 0;
  const int64_t dealt = shared ? blocks - 2 : 0;
  auto group = shared ? cfg_.kv_group : nullptr;
  if (!cfg_.input_norm.empty()) {
    auto lnl = std::make_unique<LayerNormLinear>(
        pc_, LayerNormLinearConfig{.name = cfg_.name + ".qkv",
                                   .norm_name = cfg_.input_norm,
                                   .in = cfg_.width,
                                   .out = out,
                                   .mode = qkv_mode,
                                   .bias = cfg_.bias,
                                   .norm = cfg_.norm,
                                   .eps = cfg_.eps,
                                   .init_std = cfg_.init_std,
                                   .groups = blocks,
                                   .positions = positions,
                                   .dealt_groups = dealt,
                                   .share_group = group,
                                   .return_layernorm_output = false,
                                   .overlap_name = "qkv"});
    qkv_linear_ = &lnl->linear();
    qkv_norm_ = lnl.get();
    qkv_ = std::move(lnl);
  } else {
    auto lin = std::make_unique<Linear>(pc_, LinearConfig{.name = cfg_.name + ".qkv",
                                                          .in = cfg_.width,
                                                          .out = out,
                                                          .mode = qkv_mode,
                                                          .bias = cfg_.bias,
                                                          .gather_output = false,
                                                          .input_is_parallel = true,
                                                          .init_std = cfg_.init_std,
                                                          .groups = blocks,
                                                          .positions = positions,
                                                          .dealt_groups = dealt,
                                                          .share_group = group,
                                                          .overlap_name = "qkv"});
    qkv_linear_ = lin.get();
    qkv_ = std::move(lin);
  }
}

bool MultiheadAttention::partitioned() const { return cfg_.partition == Partition::tensor; }

int64_t MultiheadAttention::local_heads() const {
  return partitioned() ? cfg_.heads / tp_size() : cfg_.heads;
}

int64_t MultiheadAttention::local_kv_heads() const {
  return partitioned() ? std::max<int64_t>(cfg_.kv_heads / tp_size(), 1) : cfg_.kv_heads;
}

int64_t MultiheadAttention::kv_replicas() const {
  return partitioned() && tp_size() > cfg_.kv_heads ? tp_size() / cfg_.kv_heads : 1;
}

kernels::RopeConfig MultiheadAttention::rope_config(bool sequence_major) const {
  return {.heads = local_heads(), .kv_heads = local_kv_heads(), .sequence_major = sequence_major};
}

const Tensor& MultiheadAttention::rope_rows(int64_t sequence) {
  if (pc_->cp_size() == 1) return rope_table_;
  if (cp_rope_sequence_ != sequence) {
    cp_rope_ = parallel::context::local_rows(rope_table_, pc_->cp_chunks(sequence));
    cp_rope_sequence_ = sequence;
  }
  return cp_rope_;
}

bool MultiheadAttention::gathers_sequence() const {
  return !partitioned() && pc_->sp == SequenceParallel::seq && tp_size() > 1;
}

void MultiheadAttention::check_input(const Tensor& x) const {
  WEFT_CHECK(x.dim() == 3 && x.size(2) == cfg_.width,
             "{}: attention input must be (B, T, {}) (sequence-major (T, B, {}) under sequence "
             "parallelism), got shape {}",
             cfg_.name, cfg_.width, cfg_.width, x.shape());
}

Norm* MultiheadAttention::input_norm() {
  return qkv_norm_ && !gathers_sequence() ? &qkv_norm_->norm() : nullptr;
}

Tensor MultiheadAttention::forward(Ctx& ctx, const Tensor& x) {
  const cuda::NvtxRange nvtx(name() + " forward");
  check_input(x);
  comm::ProcessGroup* g = pc_->tp_group();
  Tensor xin = gathers_sequence()
                   ? parallel::forward(pc_->exec, parallel::Mapping::gather_from_sp, g, x)
                   : x;
  Tensor y = attend(ctx, qkv_->forward(ctx, xin));
  // Replicated under sequence SP: keep this rank's rows.
  if (gathers_sequence()) y = parallel::forward(pc_->exec, parallel::Mapping::scatter_to_sp, g, y);
  return y;
}

Tensor MultiheadAttention::forward_normed(Ctx& ctx, const Tensor& n) {
  WEFT_CHECK(input_norm() != nullptr,
             "{}: forward_normed needs an input norm that the caller may run (input_norm())",
             cfg_.name);
  check_input(n);
  return attend(ctx, qkv_norm_->forward_normed(ctx, n));
}

Tensor MultiheadAttention::forward_normed(Ctx& ctx, const Tensor& n, const KvCacheView& cache) {
  WEFT_CHECK(input_norm() != nullptr && !pc_->sequence_parallel(),
             "{}: generation's cached attention runs without sequence parallelism, the input norm "
             "run by the caller",
             cfg_.name);
  check_input(n);
  return attend_cached(ctx, qkv_norm_->forward_normed(ctx, n), cache);
}

Tensor MultiheadAttention::attend_cached(Ctx& ctx, Tensor qkv, const KvCacheView& cache) {
  const ExecContext& ec = pc_->exec;
  const int64_t batch = qkv.size(0), rows = qkv.size(1);
  WEFT_CHECK(static_cast<int64_t>(cache.start.size()) == batch,
             "{}: {} start positions for a batch of {}", cfg_.name, cache.start.size(), batch);
  if (cfg_.rotary) {
    // Each entry's rows at its own positions.
    for (int64_t b = 0; b < batch; ++b) {
      Tensor entry = qkv.narrow(b, 1);
      kernels::RopeConfig rc = rope_config(false);
      rc.position_offset = cache.start[static_cast<size_t>(b)];
      kernels::rope_forward(ec, entry, rope_table_, rc);
    }
  }
  const kernels::AttentionConfig config{.heads = local_heads(), .kv_heads = local_kv_heads()};
  Tensor k = cache.k, v = cache.v;
  kernels::kv_cache_write(ec, qkv, cache.start, config, k, v);
  Tensor out = ec.empty({batch, rows, local_heads() * (cfg_.width / cfg_.heads)}, qkv.dtype(),
                        MemoryTag::activations);
  const bool prompt =
      std::all_of(cache.start.begin(), cache.start.end(), [](int64_t p) { return p == 0; });
  if (prompt) {
    kernels::AttentionSaved saved;
    kernels::attention_forward(ec, qkv, config, out, saved, workspace_);
  } else {
    kernels::attention_decode(ec, qkv, cache.start, config, k, v, out, workspace_);
  }
  return proj_.forward(ctx, out);
}

Tensor MultiheadAttention::attend(Ctx& ctx, const Tensor& qkv) {
  Saved& s = ctx.saved<Saved>(this);
  const ExecContext& ec = pc_->exec;
  s.qkv = qkv;
  const bool seq_major = pc_->token_layout() == parallel::TokenLayout::sequence_major;
  const int64_t b = s.qkv.size(seq_major ? 1 : 0), t = s.qkv.size(seq_major ? 0 : 1);
  // Under context parallelism t is this rank's share of a sequence of cp·t.
  s.sequence = t * pc_->cp_size();
  if (cfg_.rotary) kernels::rope_forward(ec, s.qkv, rope_rows(s.sequence), rope_config(seq_major));
  s.config = {.heads = local_heads(),
              .kv_heads = local_kv_heads(),
              .dropout = 0.0f,
              .seed = 0,
              .offset = 0,
              .causal = true,
              .sequence_major = seq_major};
  parallel::RngTracker* rng = ctx.rng();
  if (rng && ctx.training() && cfg_.dropout > 0.0f) {
    // Heads differ per rank, and under SP so do the tokens: the model-parallel
    // stream. Only a replicated attention on replicated activations shares
    // the default stream with the other ranks.
    const bool own_stream = partitioned() || pc_->sequence_parallel();
    auto scope = rng->fork(own_stream ? parallel::kModelParallelStream : parallel::kDefaultStream);
    parallel::RngTracker::Stream draw =
        rng->take(static_cast<uint64_t>(b * local_heads() * s.sequence * s.sequence));
    s.config.dropout = cfg_.dropout;
    s.config.seed = draw.seed;
    s.config.offset = draw.offset;
  }
  Tensor y = proj_.forward(ctx, attention_core(s));
  if (cfg_.recompute_core && ctx.training()) {
    // Selective recomputation: keep qkv and the log-sum-exp; the output
    // (and any probabilities) come back in attend_backward.
    // Under context parallelism the exchange's state (its blocks' outputs,
    // probabilities and merged outputs) goes whole: the backward runs the
    // exchange again.
    s.attention.out = Tensor();
    s.attention.probs = Tensor();
    s.cp = parallel::context::AttentionSaved{};
    proj_.release_saved_input(ctx);
  }
  return y;
}

Tensor MultiheadAttention::attention_core(Saved& s) {
  Shape os = s.qkv.shape();
  os[2] = local_heads() * (cfg_.width / cfg_.heads);
  const ExecContext& ec = pc_->exec;
  Tensor out = ec.empty(os, s.qkv.dtype(), MemoryTag::activations);
  if (pc_->cp_size() > 1) {
    parallel::context::attention_forward(ec, *pc_->cp, pc_->cp_comm, pc_->cp_chunks(s.sequence),
                                         s.qkv, s.config, out, s.cp, workspace_,
                                         pc_->cp_times.get());
  } else {
    kernels::attention_forward(ec, s.qkv, s.config, out, s.attention, workspace_);
  }
  return out;
}

Tensor MultiheadAttention::backward(Ctx& ctx, const Tensor& dy) {
  const cuda::NvtxRange nvtx(name() + " backward");
  comm::ProcessGroup* g = pc_->tp_group();
  // Replicated under sequence SP: the gradient of every row but this rank's is 0.
  Tensor g_out = dy;
  if (gathers_sequence()) {
    g_out = pc_->exec.zeros(parallel::gathered_shape(dy.shape(), g), dy.dtype(),
                            MemoryTag::activations);
    g_out.narrow(g->rank() * dy.size(0), dy.size(0)).copy_from(dy);
  }
  Tensor dx = qkv_->backward(ctx, attend_backward(ctx, g_out));
  if (gathers_sequence())
    dx = parallel::backward(pc_->exec, parallel::Mapping::gather_from_sp, g, dx);
  return dx;
}

Tensor MultiheadAttention::backward_normed(Ctx& ctx, const Tensor& dy) {
  WEFT_CHECK(input_norm() != nullptr, "{}: backward_normed without an input norm the caller runs",
             cfg_.name);
  return qkv_norm_->backward_normed(ctx, attend_backward(ctx, dy));
}

Tensor MultiheadAttention::attend_backward(Ctx& ctx, const Tensor& dy) {
  Saved& s = ctx.saved<Saved>(this);
  WEFT_CHECK(s.qkv.defined(), "{}: backward without a forward in this context", cfg_.name);
  // Selective recomputation: the same kernel on the same qkv, config and
  // dropout stream gives the forward's output and saved state bitwise.
  const bool dropped = pc_->cp_size() > 1 ? !s.cp.qkv.defined() : !s.attention.out.defined();
  if (cfg_.recompute_core && dropped) proj_.resave_input(ctx, attention_core(s));
  Tensor dout = proj_.backward(ctx, dy);
  Tensor dqkv = pc_->exec.empty(s.qkv.shape(), s.qkv.dtype(), MemoryTag::activations);
  if (pc_->cp_size() > 1) {
    parallel::context::attention_backward(pc_->exec, *pc_->cp, pc_->cp_comm,
                                          pc_->cp_chunks(s.sequence), dout, s.cp, dqkv, workspace_,
                                          pc_->cp_times.get());
  } else {
    kernels::attention_backward(pc_->exec, dout, s.qkv, s.attention, s.config, dqkv, workspace_);
  }
  if (cfg_.rotary) {
    kernels::rope_backward(pc_->exec, dqkv, rope_rows(s.sequence),
                           rope_config(s.config.sequence_major));
  }
  ctx.release(this);
  return dqkv;
}

Tensor MultiheadAttention::dropout_mask(Ctx& ctx) {
  const Saved& s = ctx.saved<Saved>(this);
  if (!s.qkv.defined()) return Tensor();
  WEFT_CHECK(pc_->cp_size() == 1,
             "{}: the dropout mask of a context-parallel forward is its blocks' (see "
             "kernels::attention_dropout_mask with the block positions)",
             cfg_.name);
  const bool seq_major = s.config.sequence_major;
  return kernels::attention_dropout_mask(pc_->exec, s.config, s.qkv.size(seq_major ? 1 : 0),
                                         s.qkv.size(seq_major ? 0 : 1));
}

}  // namespace weft::nn
