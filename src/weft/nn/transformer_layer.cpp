#include "weft/nn/transformer_layer.h"

#include <unordered_set>

#include "weft/core/cuda.h"
#include "weft/kernels/activation.h"
#include "weft/kernels/random.h"

namespace weft::nn {

namespace {

// a + b in a's dtype (b converted).
Tensor add(const ExecContext& ec, const Tensor& a, const Tensor& b) {
  Tensor out = ec.empty(a.shape(), a.dtype(), MemoryTag::activations);
  kernels::add(ec, a, b.to(a.dtype()), out);
  return out;
}

// dy through a residual dropout of mask (none when undefined): the branch's
// gradient in `compute`.
Tensor dropout_backward(const ExecContext& ec, const Tensor& dy, const Tensor& mask, float p,
                        DType compute) {
  if (!mask.defined()) return dy.to(compute);
  Tensor dx = ec.empty(dy.shape(), dy.dtype(), MemoryTag::activations);
  kernels::dropout_backward(ec, dy, mask, p, dx);
  return dx.to(compute);
}

}  // namespace

TransformerLayer::TransformerLayer(ContextPtr context, TransformerLayerConfig cfg)
    : Module(cfg.name),
      pc_(std::move(context)),
      cfg_(std::move(cfg)),
      attn_(pc_, {.name = cfg_.name + ".attn",
                  .input_norm = cfg_.name + ".ln_1",
                  .width = cfg_.width,
                  .heads = cfg_.heads,
                  .kv_heads = cfg_.kv_heads,
                  .kv_group = cfg_.kv_group,
                  .dropout = cfg_.attention_dropout,
                  .norm = cfg_.norm,
                  .eps = cfg_.eps,
                  .bias = cfg_.bias,
                  .rotary = cfg_.rotary,
                  .rope_theta = cfg_.rope_theta,
                  .max_positions = cfg_.max_positions,
                  .partition = cfg_.plan.lookup_together(cfg_.name + ".attn", {"qkv", "proj"}),
                  .init_std = cfg_.init_std,
                  .layers = cfg_.layers,
                  .recompute_core = cfg_.recompute == Recompute::selective}) {
  WEFT_CHECK(cfg_.recompute != Recompute::full || cfg_.moe_experts == 0,
             "{}: full recomputation does not cover MoE layers (their routers' losses are read "
             "after the forward): use --recompute selective, or none",
             cfg_.name);
  const Partition mlp_partition = cfg_.plan.lookup_together(cfg_.name + ".mlp", {"fc1", "fc2"});
  if (cfg_.moe_experts > 0) {
    moe_ = std::make_unique<MoeMLP>(pc_, MoeMLPConfig{.name = cfg_.name + ".mlp",
                                                      .norm_name = cfg_.name + ".ln_2",
                                                      .width = cfg_.width,
                                                      .hidden = cfg_.hidden,
                                                      .norm = cfg_.norm,
                                                      .eps = cfg_.eps,
                                                      .activation = cfg_.mlp,
                                                      .partition = mlp_partition,
                                                      .init_std = cfg_.init_std,
                                                      .layers = cfg_.layers,
                                                      .experts = cfg_.moe_experts,
                                                      .top_k = cfg_.moe_top_k,
                                                      .capacity_factor = cfg_.moe_capacity_factor,
                                                      .aux_coef = cfg_.moe_aux_coef,
                                                      .z_coef = cfg_.moe_z_coef});
  } else {
    mlp_ = std::make_unique<LayerNormMLP>(pc_, LayerNormMLPConfig{.name = cfg_.name + ".mlp",
                                                                  .norm_name = cfg_.name + ".ln_2",
                                                                  .width = cfg_.width,
                                                                  .hidden = cfg_.hidden,
                                                                  .norm = cfg_.norm,
                                                                  .eps = cfg_.eps,
                                                                  .activation = cfg_.mlp,
                                                                  .bias = cfg_.bias,
                                                                  .partition = mlp_partition,
                                                                  .init_std = cfg_.init_std,
                                                                  .layers = cfg_.layers});
  }
  WEFT_CHECK(cfg_.hidden_dropout >= 0.0f && cfg_.hidden_dropout < 1.0f,
             "{}: hidden dropout must lie in [0, 1), got {}", cfg_.name, cfg_.hidden_dropout);
}

kernels::ResidualDropout TransformerLayer::draw_dropout(Ctx& ctx, const Tensor& branch) const {
  parallel::RngTracker* rng = ctx.rng();
  if (!rng || !ctx.training() || cfg_.hidden_dropout == 0.0f) return {};
  // Without SP the TP ranks hold the same activations and must agree; under
  // SP each holds its own tokens.
  auto scope = rng->fork(pc_->sequence_parallel() ? parallel::kModelParallelStream
                                                  : parallel::kDefaultStream);
  // Context parallelism (the stream batch-major: no sequence SP, whose
  // shards are drawn per TP rank): the whole sequences' draw, each local row
  // at its true position's row.
  kernels::DropoutRows rows;
  int64_t n = branch.numel();
  if (pc_->cp_size() > 1 && pc_->sp != SequenceParallel::seq && branch.dim() == 3) {
    const int64_t local = branch.size(1);
    const parallel::context::SequenceChunks ch = pc_->cp_chunks(local * pc_->cp_size());
    rows.segment = ch.chunk();
    rows.group_stride = ch.sequence;
    for (int i = 0; i < 2; ++i) rows.start[i] = ch.chunk_index(ch.rank, i) * ch.chunk();
    n *= pc_->cp_size();
  }
  parallel::RngTracker::Stream draw = rng->take(static_cast<uint64_t>(n));
  return {.p = cfg_.hidden_dropout, .seed = draw.seed, .offset = draw.offset, .rows = rows};
}

Tensor TransformerLayer::residual_add(Ctx& ctx, const Tensor& x, const Tensor& branch,
                                      Tensor& mask) const {
  const kernels::ResidualDropout d = draw_dropout(ctx, branch);
  mask = {};
  if (d.p == 0.0f) return add(pc_->exec, x, branch);
  const ExecContext& ec = pc_->exec;
  Tensor dropped = ec.empty(branch.shape(), branch.dtype(), MemoryTag::activations);
  mask = ec.empty(branch.shape(), DType::u8, MemoryTag::activations);
  if (d.rows.segment == 0) {
    kernels::dropout_forward(ec, branch, d.p, d.seed, d.offset, dropped, mask);
  } else {
    // Each segment of rows (a chunk of a sequence) from its true rows' numbers.
    const int64_t c = branch.shape().last(), n = branch.numel() / c;
    const Shape rows{n, c};
    for (int64_t r = 0; r < n; r += d.rows.segment) {
      const uint64_t at = d.offset + static_cast<uint64_t>(d.rows.stream_row(r) * c);
      Tensor y = dropped.reshape(rows).narrow(r, d.rows.segment);
      Tensor m = mask.reshape(rows).narrow(r, d.rows.segment);
      kernels::dropout_forward(ec, branch.reshape(rows).narrow(r, d.rows.segment), d.p, d.seed, at,
                               y, m);
    }
  }
  return add(ec, x, dropped);
}

Tensor TransformerLayer::forward(Ctx& ctx, const Tensor& x) {
  const cuda::NvtxRange nvtx(name() + " forward");
  return forward_stream(ctx, {x, {}}, nullptr).x;
}

Tensor TransformerLayer::mlp_forward(Ctx& ctx, const Tensor& x, const Tensor& a, Tensor& h,
                                     Saved& s) {
  if (!mlp_) {
    h = residual_add(ctx, x, a, s.attn_mask);
    return moe_->forward(ctx, h);
  }
  Norm::AddOutputs r = mlp_->norm().forward_add(ctx, x, a, draw_dropout(ctx, a));
  h = r.sum;
  s.attn_mask = r.mask;
  return mlp_->forward_normed(ctx, r.y);
}

TransformerLayer::Stream TransformerLayer::forward_stream(Ctx& ctx, const Stream& in, Norm* next,
                                                          const KvCacheView* cache) {
  if (cfg_.recompute != Recompute::full || !ctx.training() || cache) {
    return forward_layer(ctx, in, next, cache);
  }
  // Full recomputation: run the forward, then drop what it saved, except
  // the state of `next` (the next layer's input norm reads it in its
  // backward).
  const std::vector<const Module*> before = ctx.owners();
  parallel::RngTracker::State rng = ctx.rng() ? ctx.rng()->state() : parallel::RngTracker::State{};
  Stream out = forward_layer(ctx, in, next, nullptr);
  std::unordered_set<const Module*> keep(before.begin(), before.end());
  keep.insert(next);
  for (const Module* owner : ctx.owners()) {
    if (keep.count(owner) == 0) ctx.release(owner);
  }
  Saved& s = ctx.saved<Saved>(this);
  s.checkpointed = true;
  s.input = in.x;
  s.rng = std::move(rng);
  return out;
}

void TransformerLayer::recompute(Ctx& ctx) {
  const Saved checkpoint = ctx.saved<Saved>(this);
  ctx.release(this);
  // The streams as the forward found them, for the forward's draws; put
  // back afterwards (the backward's draws, and other passes', go on from there).
  struct Replay {
    Ctx& ctx;
    parallel::RngTracker::State now;
    Replay(Ctx& c, const parallel::RngTracker::State& then) : ctx(c) {
      if (ctx.rng()) {
        now = ctx.rng()->state();
        ctx.rng()->set_state(then);
      }
      ctx.set_recomputing(true);
    }
    ~Replay() {
      ctx.set_recomputing(false);
      if (ctx.rng()) ctx.rng()->set_state(now);
    }
    Replay(const Replay&) = delete;
    Replay& operator=(const Replay&) = delete;
  } replay(ctx, checkpoint.rng);
  // The input norm runs here (the layer before ran it fused); its output is
  // the fused one bitwise (norm.h). No norm after: the last residual add
  // draws the same mask, and its output is not needed.
  forward_layer(ctx, {checkpoint.input, {}}, nullptr, nullptr);
}

TransformerLayer::Stream TransformerLayer::forward_layer(Ctx& ctx, const Stream& in, Norm* next,
                                                         const KvCacheView* cache) {
  Saved& s = ctx.saved<Saved>(this);
  Norm* n1 = input_norm();
  WEFT_CHECK(n1 || !in.normed.defined(),
             "{}: a normalized input for a layer whose attention runs its own norm", cfg_.name);
  WEFT_CHECK(n1 || !cache, "{}: generation's cache needs the attention's input norm", cfg_.name);
  Tensor a;
  if (n1) {
    const Tensor n = in.normed.defined() ? in.normed : n1->forward(ctx, in.x);
    a = cache ? attn_.forward_normed(ctx, n, *cache) : attn_.forward_normed(ctx, n);
  } else {
    a = attn_.forward(ctx, in.x);
  }
  Tensor h;
  const Tensor m = mlp_forward(ctx, in.x, a, h, s);
  if (!next) return {residual_add(ctx, h, m, s.mlp_mask), {}};
  Norm::AddOutputs r = next->forward_add(ctx, h, m, draw_dropout(ctx, m));
  s.mlp_mask = r.mask;
  return {r.sum, r.y};
}

Tensor TransformerLayer::mlp_backward(Ctx& ctx, const Tensor& dy, const Saved& s, Tensor& dh) {
  const ExecContext& ec = pc_->exec;
  const float p = cfg_.hidden_dropout;
  // y = h + drop(mlp(h)):  dh = dy + mlp'(drop'(dy))
  const Tensor dm = dropout_backward(ec, dy, s.mlp_mask, p, pc_->compute());
  if (!mlp_) {
    dh = add(ec, dy, moe_->backward(ctx, dm));
    return dropout_backward(ec, dh, s.attn_mask, p, pc_->compute());
  }
  Norm::AddGrads r =
      mlp_->norm().backward_add(ctx, mlp_->backward_normed(ctx, dm), dy, s.attn_mask, p);
  dh = r.dx;
  return r.dbranch;
}

Tensor TransformerLayer::backward(Ctx& ctx, const Tensor& dy) {
  const cuda::NvtxRange nvtx(name() + " backward");
  if (ctx.saved<Saved>(this).checkpointed) recompute(ctx);
  const Saved s = ctx.saved<Saved>(this);
  ctx.release(this);
  Tensor dh;
  const Tensor da = mlp_backward(ctx, dy, s, dh);
  // h = x + drop(attn(x)): dx = dh + attn'(drop'(dh))
  if (Norm* n1 = input_norm()) return n1->backward_add(ctx, attn_.backward_normed(ctx, da), dh).dx;
  return add(pc_->exec, dh, attn_.backward(ctx, da));
}

Module& TransformerLayer::mlp_module() {
  if (moe_) return *moe_;
  return *mlp_;
}

LayerNormMLP& TransformerLayer::mlp() {
  WEFT_CHECK(mlp_ != nullptr, "{}: a MoE layer has no dense MLP (moe())", cfg_.name);
  return *mlp_;
}

TransformerLayer::DropoutMasks TransformerLayer::dropout_masks(Ctx& ctx) {
  Saved& s = ctx.saved<Saved>(this);
  return {s.attn_mask, s.mlp_mask};
}

}  // namespace weft::nn
