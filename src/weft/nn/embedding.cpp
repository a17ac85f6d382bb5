#include "weft/nn/embedding.h"

#include <cstring>

#include "weft/kernels/embedding.h"
#include "weft/kernels/gemm.h"
#include "weft/nn/cross_entropy.h"
#include "weft/parallel/mappings.h"

namespace weft::nn {

using parallel::Mapping;

int64_t padded_vocab_size(int64_t vocab, int64_t multiple) {
  WEFT_CHECK(vocab > 0, "vocabulary size must be positive, got {}", vocab);
  WEFT_CHECK(multiple > 0, "vocabulary padding multiple must be positive, got {}", multiple);
  return (vocab + multiple - 1) / multiple * multiple;
}

namespace {

std::string prefixed(const std::string& name, const char* leaf) {
  return name.empty() ? std::string(leaf) : name + "." + leaf;
}

}  // namespace

VocabParallelEmbedding::VocabParallelEmbedding(EmbeddingConfig cfg)
    : Module(cfg.name), cfg_(std::move(cfg)) {
  WEFT_CHECK(cfg_.vocab > 0 && cfg_.max_seq > 0 && cfg_.channels > 0,
             "{}: embedding needs positive sizes, got vocab={} max_seq={} channels={}",
             prefixed(cfg_.name, "wte"), cfg_.vocab, cfg_.max_seq, cfg_.channels);
  WEFT_CHECK(cfg_.compute == DType::f32 || cfg_.compute == DType::bf16,
             "{}: compute dtype must be f32 or bf16, got {}", prefixed(cfg_.name, "wte"),
             dtype_name(cfg_.compute));
  const std::string wte_name = prefixed(cfg_.name, "wte.weight");
  const std::string wpe_name = prefixed(cfg_.name, "wpe.weight");
  padded_vocab_ = padded_vocab_size(cfg_.vocab, cfg_.vocab_pad);
  const int t = tp_size();
  const int r = cfg_.tp ? cfg_.tp->rank() : 0;
  WEFT_CHECK(padded_vocab_ % t == 0,
             "{}: the padded vocabulary of {} rows (vocab {} rounded up to a multiple of {}) "
             "cannot be split over tp size {}; choose --vocab-pad so that it is a multiple of "
             "the tp size (e.g. --vocab-pad {})",
             wte_name, padded_vocab_, cfg_.vocab, cfg_.vocab_pad, t, cfg_.vocab_pad * t);

  // The master is drawn for the real rows only, so that the padding multiple
  // never changes them; padded rows are zero.
  Tensor real =
      parallel::normal_init({cfg_.vocab, cfg_.channels}, cfg_.seed, wte_name, cfg_.init_std);
  Tensor full = Tensor::zeros({padded_vocab_, cfg_.channels});
  std::memcpy(full.raw(), real.raw(), static_cast<size_t>(real.nbytes()));
  wte_ = sharded_parameter(wte_name, full, 0, r, t, 1, true);
  wte_.spec.valid_rows = cfg_.vocab;

  Tensor pos =
      parallel::normal_init({cfg_.max_seq, cfg_.channels}, cfg_.seed, wpe_name, cfg_.init_std);
  wpe_ = sharded_parameter(wpe_name, pos, 0, 0, 1, 1, true);
  if (t > 1) {
    wpe_.spec.replicated_over = {"tp", "dp"};
    if (cfg_.sp != SequenceParallel::off) wpe_.grad_sum_group = cfg_.tp;
  }
}

int64_t VocabParallelEmbedding::shard_pos_offset(int64_t seq, int64_t pos_offset) const {
  if (cfg_.sp != SequenceParallel::seq || !group()) return pos_offset;
  return pos_offset + cfg_.tp->rank() * (seq / tp_size());
}

Tensor VocabParallelEmbedding::forward(Ctx& ctx, const Tensor& tokens) {
  return forward(ctx, tokens, 0);
}

Tensor VocabParallelEmbedding::forward(Ctx& ctx, const Tensor& tokens, int64_t pos_offset) {
  WEFT_CHECK(tokens.dim() == 2 && tokens.dtype() == DType::i32,
             "{}: tokens must be i32 of shape (B, T), got {} {}", wte_.name,
             dtype_name(tokens.dtype()), tokens.shape());
  const int64_t batch = tokens.size(0), seq = tokens.size(1);
  WEFT_CHECK(pos_offset >= 0 && pos_offset + seq <= cfg_.max_seq,
             "{}: positions [{}, {}) do not fit the context length {}", wpe_.name, pos_offset,
             pos_offset + seq, cfg_.max_seq);
  const kernels::EmbeddingOptions opt{.vocab_start = vocab_start(), .valid_vocab = cfg_.vocab};
  Tensor partial = Tensor::empty({batch, seq, cfg_.channels}, cfg_.compute, Device::cpu(),
                                 MemoryTag::activations);
  kernels::embedding_forward(tokens, wte_.value, partial, opt);
  comm::ProcessGroup* g = group();
  const bool sp = cfg_.sp != SequenceParallel::off;
  Tensor x = sp ? parallel::forward(Mapping::reduce_scatter_to_sp, g, partial, sp_dim(cfg_.sp))
                : parallel::forward(Mapping::reduce_from_tp, g, partial);
  kernels::position_embedding_forward(wpe_.value, x, shard_pos_offset(seq, pos_offset));
  Saved& s = ctx.saved<Saved>(this);
  s.tokens = tokens;
  s.pos_offset = pos_offset;
  return x;
}

Tensor VocabParallelEmbedding::backward(Ctx& ctx, const Tensor& dx) {
  Saved& s = ctx.saved<Saved>(this);
  WEFT_CHECK(s.tokens.defined(), "{}: backward without a forward in this context", wte_.name);
  const Tensor tokens = s.tokens;
  const int64_t pos_offset = s.pos_offset;
  ctx.release(this);
  kernels::position_embedding_backward(dx, wpe_.grad, shard_pos_offset(tokens.size(1), pos_offset));
  comm::ProcessGroup* g = group();
  const bool sp = cfg_.sp != SequenceParallel::off;
  Tensor dfull = sp ? parallel::backward(Mapping::reduce_scatter_to_sp, g, dx, sp_dim(cfg_.sp))
                    : parallel::backward(Mapping::reduce_from_tp, g, dx);
  kernels::embedding_backward(dfull, tokens, wte_.grad,
                              {.vocab_start = vocab_start(), .valid_vocab = cfg_.vocab});
  return {};
}

LmHead::LmHead(VocabParallelEmbedding& embedding, std::string name)
    : Module(std::move(name)), embedding_(embedding) {}

comm::ProcessGroup* LmHead::group() const {
  const EmbeddingConfig& cfg = embedding_.config();
  return cfg.tp && cfg.tp->size() > 1 ? cfg.tp.get() : nullptr;
}

Tensor LmHead::forward(Ctx& ctx, const Tensor& x) {
  const EmbeddingConfig& cfg = embedding_.config();
  WEFT_CHECK(x.dim() >= 2 && x.shape().last() == cfg.channels,
             "{}: input must be (..., {}), got {}", name_, cfg.channels, x.shape());
  comm::ProcessGroup* g = group();
  const bool sp = cfg.sp != SequenceParallel::off;
  Tensor xin = sp ? parallel::forward(Mapping::gather_from_sp, g, x, sp_dim(cfg.sp))
                  : parallel::forward(Mapping::copy_to_tp, g, x);
  xin = xin.to(cfg.compute);
  const Tensor& w = embedding_.wte().value;
  if (cfg.compute == DType::f32) {
    weight_compute_ = w;
  } else {
    if (!weight_compute_.defined() || weight_compute_.dtype() != cfg.compute) {
      weight_compute_ = Tensor::empty(w.shape(), cfg.compute);
    }
    weight_compute_.copy_from(w);
  }
  Shape ls = xin.shape();
  ls[ls.rank() - 1] = embedding_.local_vocab();
  Tensor logits = Tensor::empty(ls, cfg.compute, Device::cpu(), MemoryTag::activations);
  kernels::gemm(xin, weight_compute_, logits, {.trans_b = true});
  ctx.saved<Saved>(this).x = xin;
  return logits;
}

Tensor LmHead::backward(Ctx& ctx, const Tensor& dlogits) {
  const EmbeddingConfig& cfg = embedding_.config();
  Saved& s = ctx.saved<Saved>(this);
  WEFT_CHECK(s.x.defined(), "{}: backward without a forward in this context", name_);
  const Tensor x = s.x;
  ctx.release(this);
  Tensor g = dlogits.to(cfg.compute);
  // dW (V/T, C) += dlogitsᵀ · x: the tied gradient lands in wte.grad.
  kernels::gemm(g, x, embedding_.wte().grad, {.trans_a = true, .accumulate = true});
  Shape xs = g.shape();
  xs[xs.rank() - 1] = cfg.channels;
  Tensor dx = Tensor::empty(xs, cfg.compute, Device::cpu(), MemoryTag::activations);
  kernels::gemm(g, weight_compute_, dx);
  const bool sp = cfg.sp != SequenceParallel::off;
  return sp ? parallel::backward(Mapping::gather_from_sp, group(), dx, sp_dim(cfg.sp))
            : parallel::backward(Mapping::copy_to_tp, group(), dx);
}

float LmHead::forward_loss(Ctx& ctx, const Tensor& x, const Tensor& targets, int32_t ignore_index) {
  Tensor logits = forward(ctx, x);
  Tensor lse = Tensor::empty({logits.shape().rows()});
  const CrossEntropyConfig ce{.vocab = embedding_.config().vocab,
                              .tp = embedding_.config().tp,
                              .ignore_index = ignore_index};
  const float loss = vocab_parallel_cross_entropy(logits, targets, lse, ce);
  Saved& s = ctx.saved<Saved>(this);
  s.logits = logits;
  s.targets = targets;
  s.lse = lse;
  s.ignore_index = ignore_index;
  return loss;
}

Tensor LmHead::backward_loss(Ctx& ctx, float dloss) {
  Saved& s = ctx.saved<Saved>(this);
  WEFT_CHECK(s.logits.defined(), "{}: backward_loss without a forward_loss in this context", name_);
  Tensor dlogits = s.logits;
  const CrossEntropyConfig ce{.vocab = embedding_.config().vocab,
                              .tp = embedding_.config().tp,
                              .ignore_index = s.ignore_index};
  vocab_parallel_cross_entropy_backward(s.logits, s.targets, s.lse, dloss, dlogits, ce);
  s.logits = s.targets = s.lse = Tensor();
  return backward(ctx, dlogits);
}

}  // namespace weft::nn
