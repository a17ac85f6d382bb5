#include "weft/nn/embedding.h"

#include <cstring>

#include "weft/core/cuda.h"
#include "weft/kernels/embedding.h"
#include "weft/kernels/gemm.h"
#include "weft/kernels/transpose.h"
#include "weft/nn/cross_entropy.h"
#include "weft/nn/weight_sources.h"
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

Parameter vocab_parameter(const ParallelContext& pc, const std::string& name, int64_t vocab,
                          int64_t padded_vocab, int64_t channels, float init_std) {
  // The master is drawn for the real rows only, so that the padding multiple
  // never changes them; padded rows are zero.
  Tensor real = parallel::normal_init({vocab, channels}, pc.seed, name, init_std);
  Tensor full = Tensor::zeros({padded_vocab, channels});
  std::memcpy(full.raw(), real.raw(), static_cast<size_t>(real.nbytes()));
  Parameter p =
      sharded_parameter(name, full, 0, pc.tp_rank(), pc.tp_size(), 1, true, pc.exec.device());
  p.spec.valid_rows = vocab;
  return p;
}

VocabParallelEmbedding::VocabParallelEmbedding(ContextPtr context, EmbeddingConfig cfg)
    : Module(cfg.name), pc_(std::move(context)), cfg_(std::move(cfg)) {
  WEFT_CHECK(pc_ != nullptr, "{}: the embedding needs a parallel context",
             prefixed(cfg_.name, "wte"));
  WEFT_CHECK(cfg_.vocab > 0 && cfg_.max_seq > 0 && cfg_.channels > 0,
             "{}: embedding needs positive sizes, got vocab={} max_seq={} channels={}",
             prefixed(cfg_.name, "wte"), cfg_.vocab, cfg_.max_seq, cfg_.channels);
  const std::string wte_name = prefixed(cfg_.name, "wte.weight");
  const std::string wpe_name = prefixed(cfg_.name, "wpe.weight");
  padded_vocab_ = padded_vocab_size(cfg_.vocab, cfg_.vocab_pad);
  const int t = tp_size();
  WEFT_CHECK(padded_vocab_ % t == 0,
             "{}: the padded vocabulary of {} rows (vocab {} rounded up to a multiple of {}) "
             "cannot be split over tp size {}; choose vocab_pad so that it is a multiple of "
             "the tp size (e.g. vocab_pad {})",
             wte_name, padded_vocab_, cfg_.vocab, cfg_.vocab_pad, t, cfg_.vocab_pad * t);

  wte_ = vocab_parameter(*pc_, wte_name, cfg_.vocab, padded_vocab_, cfg_.channels, cfg_.init_std);
  wte_source_ = make_weight_source(pc_, wte_);
  if (!cfg_.learned_positions) return;
  Tensor pos =
      parallel::normal_init({cfg_.max_seq, cfg_.channels}, pc_->seed, wpe_name, cfg_.init_std);
  wpe_ = sharded_parameter(wpe_name, pos, 0, 0, 1, 1, true, pc_->exec.device());
  if (t > 1) {
    wpe_.spec.replicated_over = parallel::replicated_groups(true);
    if (pc_->sequence_parallel()) wpe_.grad_sum_group = pc_->tp;
  }
}

std::vector<Parameter*> VocabParallelEmbedding::own_parameters() {
  if (!cfg_.learned_positions) return {&wte()};
  return {&wte(), &wpe_};
}

bool VocabParallelEmbedding::sequence_major() const {
  return pc_->token_layout() == parallel::TokenLayout::sequence_major;
}

int64_t VocabParallelEmbedding::shard_pos_offset(int64_t seq, int64_t pos_offset) const {
  if (pc_->sp != SequenceParallel::seq || !pc_->tp_group()) return pos_offset;
  return pos_offset + pc_->tp_rank() * (seq / tp_size());
}

Tensor VocabParallelEmbedding::forward(Ctx& ctx, const Tensor& tokens) {
  return forward(ctx, tokens, 0);
}

Tensor VocabParallelEmbedding::forward(Ctx& ctx, const Tensor& tokens, int64_t pos_offset) {
  return forward(ctx, tokens, pos_offset, false);
}

Tensor VocabParallelEmbedding::forward(Ctx& ctx, const Tensor& tokens, int64_t pos_offset,
                                       bool ids_checked) {
  const cuda::NvtxRange nvtx(name() + " forward");
  check_tokens(tokens);
  const int64_t batch = tokens.size(0), seq = tokens.size(1);
  WEFT_CHECK(pos_offset >= 0 && pos_offset + seq <= cfg_.max_seq,
             "{}: positions [{}, {}) do not fit the context length {}", wpe_.name, pos_offset,
             pos_offset + seq, cfg_.max_seq);
  const ExecContext& ec = pc_->exec;
  // The residual stream's token order: sequence-major under seq SP.
  Tensor ids = tokens;
  if (sequence_major()) {
    ids = ec.empty({seq, batch}, DType::i32, MemoryTag::activations);
    kernels::transpose01(pc_->exec, tokens, ids);
  }
  Tensor x = lookup(ctx, ids, ids_checked);
  if (cfg_.learned_positions) {
    WEFT_CHECK(pc_->cp_size() == 1 || pos_offset == 0,
               "{}: context parallelism splits whole sequences (position offset {})", wpe_.name,
               pos_offset);
    // Under context parallelism the rows of this rank's chunks' positions.
    const Tensor table = pc_->cp_size() > 1 ? parallel::context::local_rows(
                                                  wpe_.value, pc_->cp_chunks(seq * pc_->cp_size()))
                                            : wpe_.value;
    kernels::position_embedding_forward(pc_->exec, table, x, shard_pos_offset(seq, pos_offset),
                                        sequence_major());
  }
  Saved& s = ctx.saved<Saved>(this);
  s.tokens = ids;
  s.pos_offset = pos_offset;
  s.ids_checked = ids_checked;
  return x;
}

Tensor VocabParallelEmbedding::forward_at(Ctx& ctx, const Tensor& tokens,
                                          std::span<const int64_t> start) {
  const cuda::NvtxRange nvtx(name() + " forward");
  check_tokens(tokens);
  WEFT_CHECK(!pc_->sequence_parallel(),
             "{}: positions per batch entry are for generation, which runs without sequence "
             "parallelism",
             wte().name);
  const int64_t batch = tokens.size(0), seq = tokens.size(1);
  WEFT_CHECK(static_cast<int64_t>(start.size()) == batch, "{}: {} start positions for {} entries",
             wte().name, start.size(), batch);
  for (size_t b = 0; b < start.size(); ++b) {
    WEFT_CHECK(start[b] >= 0 && start[b] + seq <= cfg_.max_seq,
               "{}: entry {}'s positions [{}, {}) do not fit the context length {}", wte().name, b,
               start[b], start[b] + seq, cfg_.max_seq);
  }
  Tensor x = lookup(ctx, tokens, false);
  if (cfg_.learned_positions) {
    for (int64_t b = 0; b < batch; ++b) {
      Tensor entry = x.narrow(b, 1);
      kernels::position_embedding_forward(pc_->exec, wpe_.value, entry,
                                          start[static_cast<size_t>(b)]);
    }
  }
  return x;
}

void VocabParallelEmbedding::check_tokens(const Tensor& tokens) const {
  WEFT_CHECK(tokens.dim() == 2 && tokens.dtype() == DType::i32,
             "{}: tokens must be i32 of shape (B, T), got {} {}", wte().name,
             dtype_name(tokens.dtype()), tokens.shape());
}

Tensor VocabParallelEmbedding::lookup(Ctx& ctx, const Tensor& ids, bool ids_checked) {
  const kernels::EmbeddingOptions opt{
      .vocab_start = vocab_start(), .valid_vocab = cfg_.vocab, .ids_checked = ids_checked};
  const ExecContext& ec = pc_->exec;
  Tensor partial =
      ec.empty({ids.size(0), ids.size(1), cfg_.channels}, pc_->compute(), MemoryTag::activations);
  kernels::embedding_forward(pc_->exec, ids, wte_source_->weight_for_forward(ctx), partial, opt);
  comm::ProcessGroup* g = pc_->tp_group();
  Tensor x_slot;  // the output is the residual stream's: a tensor of its own
  return pc_->sequence_parallel()
             ? parallel::reduce_scatter_rows(ec, g, partial, x_slot).get(ec)
             : parallel::forward(pc_->exec, Mapping::reduce_from_tp, g, partial);
}

Tensor VocabParallelEmbedding::backward(Ctx& ctx, const Tensor& dx) {
  const cuda::NvtxRange nvtx(name() + " backward");
  Saved& s = ctx.saved<Saved>(this);
  WEFT_CHECK(s.tokens.defined(), "{}: backward without a forward in this context", wte().name);
  const Tensor ids = s.tokens;
  const int64_t pos_offset = s.pos_offset;
  const bool ids_checked = s.ids_checked;
  ctx.release(this);
  const int64_t seq = ids.size(sequence_major() ? 0 : 1);
  if (cfg_.learned_positions && pc_->cp_size() > 1) {
    const parallel::context::SequenceChunks chunks = pc_->cp_chunks(seq * pc_->cp_size());
    Tensor local = Tensor::zeros({chunks.local(), cfg_.channels});
    kernels::position_embedding_backward(pc_->exec, dx, local, shard_pos_offset(seq, pos_offset),
                                         sequence_major());
    parallel::context::add_local_rows(local, wpe_.grad, chunks);
  } else if (cfg_.learned_positions) {
    kernels::position_embedding_backward(pc_->exec, dx, wpe_.grad,
                                         shard_pos_offset(seq, pos_offset), sequence_major());
  }
  const ExecContext& ec = pc_->exec;
  comm::ProcessGroup* g = pc_->tp_group();
  Tensor dfull = pc_->sequence_parallel()
                     ? parallel::all_gather_rows(ec, g, dx, pc_->workspace->gemm.gathered).get(ec)
                     : parallel::backward(pc_->exec, Mapping::reduce_from_tp, g, dx);
  // No weight in backward: the gradient goes through the source alone.
  Tensor dwte = wte_source_->weight_grad(ctx);
  kernels::embedding_backward(
      pc_->exec, dfull, ids, dwte,
      {.vocab_start = vocab_start(), .valid_vocab = cfg_.vocab, .ids_checked = ids_checked});
  wte_source_->finalize_weight_grad(ctx, dwte);
  return {};
}

std::shared_ptr<parallel::WeightSource> LmHead::source_for(VocabParallelEmbedding& embedding,
                                                           Parameter& weight, bool tied,
                                                           const std::string& name) {
  if (tied) return embedding.wte_source();
  const EmbeddingConfig& cfg = embedding.config();
  weight = vocab_parameter(*embedding.context(), name + ".weight", cfg.vocab,
                           embedding.padded_vocab(), cfg.channels, cfg.init_std);
  return make_weight_source(embedding.context(), weight);
}

LmHead::LmHead(VocabParallelEmbedding& embedding, bool tied, std::string name)
    : Module(name),
      embedding_(embedding),
      tied_(tied),
      source_(source_for(embedding, weight_, tied, name)),
      linear_(embedding.context(),
              {.name = name,
               .in = embedding.config().channels,
               .out = embedding.padded_vocab(),
               .mode = Parallel::column,
               .bias = false},
              source_) {}

std::vector<Parameter*> LmHead::own_parameters() {
  if (tied_) return {};
  return {&source_->parameter()};
}

Tensor LmHead::forward(Ctx& ctx, const Tensor& x) {
  const EmbeddingConfig& cfg = embedding_.config();
  WEFT_CHECK(x.dim() >= 2 && x.shape().last() == cfg.channels,
             "{}: input must be (..., {}), got {}", name_, cfg.channels, x.shape());
  return linear_.forward(ctx, x);
}

Tensor LmHead::backward(Ctx& ctx, const Tensor& dlogits) { return linear_.backward(ctx, dlogits); }

float LmHead::forward_loss(Ctx& ctx, const Tensor& x, const Tensor& targets, int32_t ignore_index) {
  const Tensor loss = forward_loss_tensor(ctx, x, targets, ignore_index);
  return loss.device().is_cpu() ? *loss.data<float>() : loss.to(Device::cpu()).data<float>()[0];
}

Tensor LmHead::forward_loss_tensor(Ctx& ctx, const Tensor& x, const Tensor& targets,
                                   int32_t ignore_index, bool targets_checked) {
  Tensor logits = forward(ctx, x);
  const ExecContext& ec = embedding_.context()->exec;
  Tensor lse = ec.empty({logits.shape().rows()}, DType::f32, MemoryTag::activations);
  Tensor loss = ec.empty({2}, DType::f32, MemoryTag::activations);
  const CrossEntropyConfig ce{.vocab = embedding_.config().vocab,
                              .tp = embedding_.context()->tp,
                              .ignore_index = ignore_index,
                              .exec = ec,
                              .targets_checked = targets_checked};
  vocab_parallel_cross_entropy(logits, targets, lse, loss, ce);
  Saved& s = ctx.saved<Saved>(this);
  s.logits = logits;
  s.targets = targets;
  s.lse = lse;
  s.loss = loss;
  s.ignore_index = ignore_index;
  s.targets_checked = targets_checked;
  return loss;
}

Tensor LmHead::backward_loss(Ctx& ctx, float dloss) {
  Saved& s = ctx.saved<Saved>(this);
  WEFT_CHECK(s.logits.defined(), "{}: backward_loss without a forward_loss in this context", name_);
  Tensor dlogits = s.logits;
  const CrossEntropyConfig ce{.vocab = embedding_.config().vocab,
                              .tp = embedding_.context()->tp,
                              .ignore_index = s.ignore_index,
                              .exec = embedding_.context()->exec,
                              .targets_checked = s.targets_checked};
  vocab_parallel_cross_entropy_backward(s.logits, s.targets, s.lse, dloss, dlogits, ce, &s.loss);
  s.logits = s.targets = s.lse = s.loss = Tensor();
  return backward(ctx, dlogits);
}

}  // namespace weft::nn
