#include "weft/nn/attention.h"

#include <cstring>

#include "weft/parallel/mappings.h"

namespace weft::nn {

namespace {

// local (B, T/parts, C) -> (B, T, C): zeros except this rank's block of
// positions [index·T/parts, (index+1)·T/parts). The adjoint of keeping a slice
// along dim 1.
Tensor zero_padded_sequence(const Tensor& local, int parts, int index) {
  const int64_t b = local.size(0), t_local = local.size(1), c = local.size(2);
  Tensor full =
      Tensor::zeros({b, t_local * parts, c}, local.dtype(), Device::cpu(), MemoryTag::activations);
  const int64_t esize = dtype_bits(local.dtype()) / 8;
  const int64_t block = t_local * c * esize;
  const char* src = static_cast<const char*>(local.raw());
  char* dst = static_cast<char*>(full.raw());
  for (int64_t i = 0; i < b; ++i) {
    std::memcpy(dst + (i * parts + index) * block, src + i * block, static_cast<size_t>(block));
  }
  return full;
}

}  // namespace

MultiheadAttentionConfig MultiheadAttention::checked(MultiheadAttentionConfig cfg) {
  WEFT_CHECK(cfg.width > 0 && cfg.heads > 0,
             "{}: attention needs a positive width and head count, got width {} and {} heads",
             cfg.name, cfg.width, cfg.heads);
  WEFT_CHECK(cfg.width % cfg.heads == 0, "{}: width {} is not divisible by the {} heads", cfg.name,
             cfg.width, cfg.heads);
  const int t = cfg.tp ? cfg.tp->size() : 1;
  WEFT_CHECK(cfg.partition == Partition::replicate || cfg.heads % t == 0,
             "{}: {} attention heads cannot be split over tensor-parallel size {}: each rank "
             "needs whole heads, so the head count must be divisible by the TP size",
             cfg.name, cfg.heads, t);
  WEFT_CHECK(cfg.dropout >= 0.0f && cfg.dropout < 1.0f,
             "{}: attention dropout must lie in [0, 1), got {}", cfg.name, cfg.dropout);
  WEFT_CHECK(cfg.layers >= 1, "{}: layers (for the proj init scale) must be >= 1, got {}", cfg.name,
             cfg.layers);
  return cfg;
}

MultiheadAttention::MultiheadAttention(MultiheadAttentionConfig cfg)
    : Module(cfg.name),
      cfg_(checked(std::move(cfg))),
      proj_(residual_projection(cfg_, cfg_.partition == Partition::tensor, cfg_.name + ".proj",
                                cfg_.width, cfg_.width)) {
  const Parallel qkv_mode = partitioned() ? Parallel::column : Parallel::none;
  if (!cfg_.input_norm.empty()) {
    auto lnl =
        std::make_unique<LayerNormLinear>(LayerNormLinearConfig{.name = cfg_.name + ".qkv",
                                                                .norm_name = cfg_.input_norm,
                                                                .in = cfg_.width,
                                                                .out = 3 * cfg_.width,
                                                                .mode = qkv_mode,
                                                                .bias = true,
                                                                .norm = cfg_.norm,
                                                                .eps = cfg_.eps,
                                                                .tp = cfg_.tp,
                                                                .sp = cfg_.sp,
                                                                .compute = cfg_.compute,
                                                                .seed = cfg_.seed,
                                                                .init_std = cfg_.init_std,
                                                                .out_groups = 3,
                                                                .return_layernorm_output = false});
    qkv_linear_ = &lnl->linear();
    qkv_ = std::move(lnl);
  } else {
    auto lin = std::make_unique<Linear>(LinearConfig{.name = cfg_.name + ".qkv",
                                                     .in = cfg_.width,
                                                     .out = 3 * cfg_.width,
                                                     .mode = qkv_mode,
                                                     .bias = true,
                                                     .tp = cfg_.tp,
                                                     .gather_output = false,
                                                     .input_is_parallel = true,
                                                     .sp = cfg_.sp,
                                                     .compute = cfg_.compute,
                                                     .seed = cfg_.seed,
                                                     .init_std = cfg_.init_std,
                                                     .out_groups = 3});
    qkv_linear_ = lin.get();
    qkv_ = std::move(lin);
  }
}

bool MultiheadAttention::partitioned() const { return cfg_.partition == Partition::tensor; }

int64_t MultiheadAttention::local_heads() const {
  return partitioned() ? cfg_.heads / tp_size() : cfg_.heads;
}

bool MultiheadAttention::gathers_sequence() const {
  return !partitioned() && cfg_.sp == SequenceParallel::seq && tp_size() > 1;
}

Tensor MultiheadAttention::forward(Ctx& ctx, const Tensor& x) {
  WEFT_CHECK(x.dim() == 3 && x.size(2) == cfg_.width,
             "{}: attention input must be (B, T, {}), got shape {}", cfg_.name, cfg_.width,
             x.shape());
  Saved& s = ctx.saved<Saved>(this);
  s.x_dtype = x.dtype();
  Tensor xin = gathers_sequence()
                   ? parallel::forward(parallel::Mapping::gather_from_sp, cfg_.tp.get(), x, 1)
                   : x;
  s.qkv = qkv_->forward(ctx, xin);
  const int64_t b = s.qkv.size(0), t = s.qkv.size(1);
  s.config = {.heads = local_heads(), .dropout = 0.0f, .seed = 0, .offset = 0, .causal = true};
  parallel::RngTracker* rng = ctx.rng();
  if (rng && ctx.training() && cfg_.dropout > 0.0f) {
    // Heads differ per rank, and under SP so do the tokens: the model-parallel
    // stream. Only a replicated attention on replicated activations shares
    // the default stream with the other ranks.
    const bool own_stream = partitioned() || cfg_.sp != SequenceParallel::off;
    auto scope = rng->fork(own_stream ? parallel::kModelParallelStream : parallel::kDefaultStream);
    parallel::RngTracker::Stream draw = rng->take(static_cast<uint64_t>(b * local_heads() * t * t));
    s.config.dropout = cfg_.dropout;
    s.config.seed = draw.seed;
    s.config.offset = draw.offset;
  }
  Tensor out = Tensor::empty({b, t, s.qkv.size(2) / 3}, s.qkv.dtype(), Device::cpu(),
                             MemoryTag::activations);
  kernels::attention_forward(s.qkv, s.config, out, s.attention, workspace_);
  Tensor y = proj_.forward(ctx, out);
  if (gathers_sequence()) y = parallel::slice_along(y, 1, tp_size(), cfg_.tp->rank());
  return y;
}

Tensor MultiheadAttention::backward(Ctx& ctx, const Tensor& dy) {
  Saved& s = ctx.saved<Saved>(this);
  WEFT_CHECK(s.qkv.defined(), "{}: backward without a forward in this context", cfg_.name);
  Tensor g = dy.to(cfg_.compute);
  if (gathers_sequence()) g = zero_padded_sequence(g, tp_size(), cfg_.tp->rank());
  Tensor dout = proj_.backward(ctx, g).to(s.qkv.dtype());
  Tensor dqkv = Tensor::empty(s.qkv.shape(), s.qkv.dtype(), Device::cpu(), MemoryTag::activations);
  kernels::attention_backward(dout, s.qkv, s.attention, s.config, dqkv, workspace_);
  const DType x_dtype = s.x_dtype;
  ctx.release(this);
  Tensor dx = qkv_->backward(ctx, dqkv);
  if (gathers_sequence()) {
    dx = parallel::backward(parallel::Mapping::gather_from_sp, cfg_.tp.get(), dx, 1);
  }
  return dx.to(x_dtype);
}

Tensor MultiheadAttention::dropout_mask(Ctx& ctx) { return ctx.saved<Saved>(this).attention.mask; }

}  // namespace weft::nn
