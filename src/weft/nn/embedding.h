// VocabParallelEmbedding: GPT-2's token table wte split by vocabulary rows over
// the TP group, plus the position table wpe, replicated.
//
// Vocabulary padding. wte has V_padded = round_up(V, vocab_pad) rows, a
// function of V and the configured multiple only (never of the TP size), so
// the global table, its initialization and its checkpoint shape are the same
// at every TP size. Each of the T ranks holds the rows
// [r·V_padded/T, (r+1)·V_padded/T); a TP size that does not divide V_padded
// is an error that names --vocab-pad. With the default multiple 128 every
// power-of-two TP size up to 128 works for any V. Rows >= V are zero at
// initialization, never looked up (a token id >= V is an error), get exactly
// zero gradient (also through the tied LM head: the cross-entropy gives padded
// logits zero gradient), and therefore stay zero; ShardSpec::valid_rows = V.
//
// Forward, tokens (B, T) i32 -> x (B, T, C):
//   local lookup (tokens of other ranks' rows give 0)
//   -> reduce_from_tp (all-reduce)       [SP: reduce_scatter_to_sp]
//   -> + wpe, once, after the reduction  [SP: the rank's positions]
// The tokens are the TP group's whole batch, identical on every rank of the
// group (as Megatron's data loader provides them), with or without sequence
// parallelism. Under SP the output is this rank's shard: positions
// [r·T/tp, (r+1)·T/tp) of every sample (seq) or samples [r·B/tp, (r+1)·B/tp)
// (batch), so each rank adds the position rows of the tokens it holds.
//
// Backward, dx (B, T, C) [SP: this rank's shard] -> nothing (tokens are not
// differentiable): wte.grad += the rows of the local slice; wpe.grad += the
// positions. Under SP dx is first all-gathered (the dual of the
// reduce-scatter), and wpe's gradient holds only this rank's tokens:
// grad_sum_group is the TP group.
//
// Context parallelism (ParallelContext::cp of N > 1 ranks): the tokens are
// this rank's 2 chunks of sequences of N·T positions, and wpe's rows are
// those of the chunks' true positions (parallel/context/chunks.h), their
// gradients added back to those rows.
//
// wte reaches the lookup and the tied LM head through one weight source
// (weight_for_forward; weight_grad + finalize_weight_grad in backward, no
// weight): the local slice, or under generalized tensor parallelism the
// gathered slice, its gradient reduce-scattered back (weight_sources.h).
//
// Collectives per call (TP > 1):  forward      backward
//   no SP                          1 all_reduce 0
//   SP (seq or batch)              1 reduce_scatter 1 all_gather
#pragma once

#include <memory>
#include <span>
#include <string>

#include "weft/kernels/loss.h"
#include "weft/nn/linear.h"
#include "weft/nn/module.h"

namespace weft::nn {

inline constexpr int64_t kDefaultVocabPad = 128;

// round_up(vocab, multiple): the rows of the padded token table.
int64_t padded_vocab_size(int64_t vocab, int64_t multiple = kDefaultVocabPad);

struct EmbeddingConfig {
  // Parameters are <name>.wte.weight and <name>.wpe.weight ("wte.weight" and
  // "wpe.weight" when the name is empty).
  std::string name{};
  int64_t vocab = 0;     // real vocabulary size V
  int64_t max_seq = 0;   // rows of wpe (the context length)
  int64_t channels = 0;  // C
  int64_t vocab_pad = kDefaultVocabPad;
  float init_std = 0.02f;
  // wpe: a learned position table added after the lookup (GPT-2). Without it
  // (rotary positions inside attention, Llama) there is no wpe parameter.
  bool learned_positions = true;
};

// A token table split by vocabulary rows over the TP group: the real rows
// drawn from (seed, name), the padded rows zero (valid_rows = vocab). wte and
// an untied LM head's weight.
Parameter vocab_parameter(const ParallelContext& pc, const std::string& name, int64_t vocab,
                          int64_t padded_vocab, int64_t channels, float init_std);

class VocabParallelEmbedding : public Module {
 public:
  VocabParallelEmbedding(ContextPtr context, EmbeddingConfig cfg);

  // tokens (B, T) i32 -> x in the context's compute dtype and token layout:
  // (B, T, C), or (T, B, C) under seq SP; [SP: this rank's rows]
  Tensor forward(Ctx& ctx, const Tensor& tokens) override;
  // pos_offset: the position of the first token (generation continuing a prefix).
  Tensor forward(Ctx& ctx, const Tensor& tokens, int64_t pos_offset);
  // ids_checked: the caller checked the token ids on the host
  // (kernels::EmbeddingOptions::ids_checked), so that a GPU reads nothing back.
  Tensor forward(Ctx& ctx, const Tensor& tokens, int64_t pos_offset, bool ids_checked);
  // Generation (forward only, nothing saved for a backward, no sequence parallelism):
  // tokens (B, S) -> x (B, S, C), entry b's tokens at positions start[b],
  // start[b] + 1, ... (each sequence of a batch at its own length).
  Tensor forward_at(Ctx& ctx, const Tensor& tokens, std::span<const int64_t> start);
  // dx (B, T, C) [SP: shard] -> an undefined tensor; gradients accumulate.
  Tensor backward(Ctx& ctx, const Tensor& dx) override;
  std::vector<Parameter*> own_parameters() override;

  const EmbeddingConfig& config() const { return cfg_; }
  const ContextPtr& context() const { return pc_; }
  Parameter& wte() { return wte_source_->parameter(); }
  const Parameter& wte() const { return wte_source_->parameter(); }
  Parameter& wpe() { return wpe_; }
  // wte as the lookup and the tied LM head's GEMMs read it.
  const std::shared_ptr<parallel::WeightSource>& wte_source() const { return wte_source_; }
  int tp_size() const { return pc_->tp_size(); }
  int64_t padded_vocab() const { return padded_vocab_; }
  // Vocabulary id of this rank's first row, and its number of rows (at the TP level).
  int64_t vocab_start() const { return wte().spec.is_split() ? wte().spec.offset : 0; }
  int64_t local_vocab() const { return wte().spec.tp_rows(); }

 private:
  struct Saved {
    Tensor tokens;  // in the token layout: (B, T) or (T, B)
    int64_t pos_offset = 0;
    bool ids_checked = false;
  };
  void check_tokens(const Tensor& tokens) const;
  // ids in the token layout -> the looked-up rows summed over TP (this
  // rank's SP shard), positions not yet added.
  Tensor lookup(Ctx& ctx, const Tensor& ids, bool ids_checked);
  // Position of the first token this rank holds after the SP split.
  int64_t shard_pos_offset(int64_t seq, int64_t pos_offset) const;
  bool sequence_major() const;

  ContextPtr pc_;
  EmbeddingConfig cfg_;
  int64_t padded_vocab_ = 0;
  // wte_ is the table as built; wte_source_ keeps it or takes it over
  // (make_weight_source): wte() is the source's parameter.
  Parameter wte_, wpe_;
  std::shared_ptr<parallel::WeightSource> wte_source_;
};

// LmHead: the output projection, logits = x · Wᵀ on this rank's vocabulary
// slice: a column-parallel Linear without bias. Tied (GPT-2) it runs over the
// embedding's weight source, W = wte, and owns no parameter: its weight
// gradient accumulates into the embedding's wte.grad, and the embedding lists
// wte once. Untied (Llama) W is its own <name>.weight, laid out as wte
// (vocabulary rows split over TP, padded rows zero). The parallel context is
// the embedding's.
//
//   x (B, T, C) -> copy_to_tp  [SP: gather_from_sp] -> logits (B, T, Vp/T)
//
// The logits cover the TP group's whole batch (under SP the input shards are
// gathered), in the order of the embedding's tokens, so the targets are the
// group's full targets too. forward_loss/backward_loss add the vocab-parallel
// cross-entropy and compute the logits' gradient in place of the logits.
//
// Collectives per call (TP > 1):  forward              backward
//   logits, no SP                  0                    1 all_reduce
//   logits, SP                     1 all_gather         1 reduce_scatter
//   loss (+ cross-entropy)         + 2 all_reduce       + 0
class LmHead : public Module {
 public:
  explicit LmHead(VocabParallelEmbedding& embedding, bool tied = true,
                  std::string name = "lm_head");

  // x (B, T, C) [layout and SP shard as the embedding's output] -> logits
  // (B, T, Vp/T) [(T, B, Vp/T) under seq SP] of this rank's vocabulary slice,
  // for the TP group's tokens
  Tensor forward(Ctx& ctx, const Tensor& x) override;
  // dlogits -> dx [SP: shard]; wte.grad += dlogitsᵀ · x
  Tensor backward(Ctx& ctx, const Tensor& dlogits) override;
  std::vector<Module*> children() override { return {&linear_}; }
  std::vector<Parameter*> own_parameters() override;
  bool tied() const { return tied_; }

  // x, targets (the group's full targets, in the token layout: (B, T) or
  // (T, B)) i32 -> the mean cross-entropy over the tokens whose target is not
  // ignore_index, the same on every rank.
  float forward_loss(Ctx& ctx, const Tensor& x, const Tensor& targets,
                     int32_t ignore_index = kernels::kIgnoreIndex);
  // The same, left on the device: f32 {mean loss, scored rows} where the
  // logits are. targets_checked: the caller checked the targets' ids on the
  // host, so that a GPU reads nothing back (the backward then takes the count
  // from this tensor).
  Tensor forward_loss_tensor(Ctx& ctx, const Tensor& x, const Tensor& targets,
                             int32_t ignore_index = kernels::kIgnoreIndex,
                             bool targets_checked = false);
  // -> dx of dloss · loss (see backward); the saved logits become their gradient.
  Tensor backward_loss(Ctx& ctx, float dloss = 1.0f);

  VocabParallelEmbedding& embedding() { return embedding_; }
  Linear& linear() { return linear_; }

 private:
  struct Saved {
    Tensor logits, targets, lse, loss;
    int32_t ignore_index = kernels::kIgnoreIndex;
    bool targets_checked = false;
  };

  // The untied head's weight (undefined when tied) and the source the
  // Linear reads it through: wte's when tied.
  static std::shared_ptr<parallel::WeightSource> source_for(VocabParallelEmbedding& embedding,
                                                            Parameter& weight, bool tied,
                                                            const std::string& name);
  VocabParallelEmbedding& embedding_;
  bool tied_;
  Parameter weight_;
  std::shared_ptr<parallel::WeightSource> source_;
  Linear linear_;  // column-parallel over the vocabulary, no bias, on wte's source
};

}  // namespace weft::nn
