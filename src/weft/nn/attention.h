// MultiheadAttention: causal self-attention (GPT-2's, and Llama's with rotary
// positions and grouped-query attention), heads split over the TP group.
//
//   x (B, T, C) [SP: this rank's tokens; sequence-major (T, B, C) under seq SP]
//     -> [input norm] -> copy_to_tp [SP: gather_from_sp]
//     -> qkv (C -> (H + 2·Hkv)·D/T, column-parallel: each rank holds the q, k
//        and v rows of its own heads, laid out [q | k | v])
//     -> [rotary positions on q and k]
//     -> causal attention over the local heads -> (B, T, H·D/T)
//     -> proj (H·D/T -> C, row-parallel) -> reduce_from_tp [SP: reduce_scatter_to_sp] -> + bias
//   -> y (B, T, C) [SP: this rank's tokens]
//
// D = C/H. Grouped-query attention: Hkv key/value heads (kv_heads; H by
// default), each serving H/Hkv query heads. The qkv weight's rows are
// H/Hkv + 2 equal blocks of Hkv·D rows, the query blocks then k then v, each
// split over TP (groups), so a rank holds whole KV heads and exactly the
// query heads that use them. Query block b holds, for every KV head g, the
// query head that Hugging Face numbers g·(H/Hkv) + b: query head h of the
// [q] part (any rank) uses KV head h mod Hkv, which is the attention kernel's
// rule. With Hkv = H this is GPT-2's [q | k | v] (three blocks of C rows).
// proj's input columns follow the query heads, so its row-parallel split is
// by the same H/Hkv blocks: each rank's columns are its query heads'.
// The io/ layer permutes q rows and proj columns to and from Hugging Face's
// head order. Whole heads live on one rank: H divisible by T, and Hkv
// divisible by T or dividing it.
//
// Replicated key/value heads (T > Hkv, Megatron's rule for TP beyond the
// KV heads): each KV head is held by R = T/Hkv ranks. Rank r holds KV head
// g = r mod Hkv (its k and v rows, the same on the R ranks r ≡ g mod Hkv,
// its share group) and the H/T query heads of query blocks b ≡ r/Hkv
// (mod R) for that g, all of which read KV head g. In the qkv weight's
// spec (parallel::shared_split_spec) the blocks are split at Hkv positions
// of D rows, the query blocks dealt round-robin among the R sharing ranks
// and k and v common to them: locally [q: H/T heads | k | v], one KV head.
// That choice makes proj's columns a plain split: the query heads of rank r
// are [q]-order heads r, r + T, r + 2T, ... (query head b·Hkv + g), which is
// proj's input split into H/T blocks over T ranks. Each rank's k and v
// gradients are its own query heads' part: they are summed over the share
// group (optim::GradSync), and checkpoints save the k and v rows once. The
// share group is built collectively over the TP group (kv_share_group);
// Gpt builds one for all its layers. Not with GTP (refused by name).
// proj is a residual output projection (std init_std/√(2·layers), GPT-2).
//
// With an input norm, input_norm() hands it to a caller that runs it itself
// (fused with the residual add before it, nn/norm.h) and calls
// forward_normed / backward_normed with the normalized input and its
// gradient; null when attention gathers its input before the norm
// (replicated under sequence SP).
//
// Rotary positions (rotary): q and k rotated in place after the qkv GEMM by
// position (Hugging Face Llama's rotate-half, base rope_theta), the cos/sin
// table computed once at construction for max_positions positions; backward
// rotates dq and dk back before the qkv GEMM's backward.
//
// Context parallelism (ParallelContext::cp of N > 1 ranks): the input holds
// this rank's 2 chunks of every sequence (parallel/context/chunks.h); rotary
// angles are those of the chunks' true positions and attention runs over the
// whole sequence by parallel/context/attention.h's exchange, its dropout
// keyed by true positions (the draw is the whole sequence's B·H·S·S).
//
// Attention-probability dropout draws B·H_local·T·T numbers from the
// "model-parallel" stream of ctx.rng() (different per TP rank: each rank
// holds different heads, and under SP the whole layer runs on that stream).
// A replicated attention without SP uses the "default" stream instead, so
// ranks holding the same activations draw the same masks. No dropout when
// ctx.rng() is null, ctx is not training or dropout is 0.
//
// With Partition::replicate every rank holds the whole module. Under batch SP
// (or without SP) it runs on the rank's own samples with no communication;
// under sequence SP attention needs every position of a sequence, so it
// all-gathers the input along the sequence, runs on all tokens, keeps its own
// tokens' outputs, and in backward reduce-scatters the input gradient (each
// rank's gradients come from its own tokens' outputs only: partial sums over
// the group, grad_sum_group).
//
// Collectives (TP > 1):           forward                            backward
//   partitioned, no SP            1 all_reduce                       1 all_reduce
//   partitioned, SP (seq/batch)   1 all_gather + 1 reduce_scatter    the same
//   replicated, sequence SP       1 all_gather                       1 reduce_scatter
//   replicated otherwise          0                                  0
#pragma once

#include <memory>
#include <span>
#include <string>

#include "weft/kernels/attention.h"
#include "weft/kernels/rope.h"
#include "weft/nn/layernorm_linear.h"
#include "weft/nn/linear.h"
#include "weft/nn/partition.h"
#include "weft/parallel/context/attention.h"

namespace weft::nn {

struct MultiheadAttentionConfig {
  std::string name{};  // "h.3.attn": parameters <name>.qkv.* and <name>.proj.*
  // "h.3.ln_1": a norm fused with qkv (a LayerNormLinear); empty: no input norm.
  std::string input_norm{};
  int64_t width = 0;     // C
  int64_t heads = 0;     // H, C % H == 0
  int64_t kv_heads = 0;  // Hkv, H % Hkv == 0; 0: H
  // T > Hkv: the ranks that share this rank's KV head (kv_share_group);
  // null: the module builds it (collectively over the TP group).
  std::shared_ptr<comm::ProcessGroup> kv_group{};
  float dropout = 0.0f;  // attention-probability dropout
  NormKind norm = NormKind::layer;
  float eps = 1e-5f;
  bool bias = true;  // qkv and proj
  bool rotary = false;
  double rope_theta = 10000.0;
  int64_t max_positions = 0;  // rotary: the table's positions
  Partition partition = Partition::tensor;
  float init_std = 0.02f;
  int64_t layers = 1;  // proj's std is init_std/√(2·layers)
  // Selective recomputation (nn/recompute.h): training forwards drop the
  // attention kernel's output (proj's input) and saved probabilities; the
  // backward runs the kernel again.
  bool recompute_core = false;
};

// The ranks of the TP group that hold this rank's key/value head when the TP
// size exceeds `kv_heads` (ranks g, g + kv_heads, g + 2·kv_heads, ... share
// KV head g); null when no head is replicated (or without TP). Collective
// over the TP group: every rank of it calls it.
std::shared_ptr<comm::ProcessGroup> kv_share_group(const ParallelContext& pc, int64_t kv_heads);

// Generation's view of one layer's key/value cache (infer/kv_cache.h holds
// the tensors): k and v (B, local_kv_heads(), L, D) in the compute dtype
// (kernels::kv_cache_write's layout: only the KV heads this rank holds), and
// the position of each batch entry's first new row (its length so far).
struct KvCacheView {
  Tensor k, v;
  std::span<const int64_t> start;
};

class MultiheadAttention : public Module {
 public:
  MultiheadAttention(ContextPtr context, MultiheadAttentionConfig cfg);

  // x (B, T, C) [sequence-major under seq SP: (T, B, C)] -> y, the same
  // layout, in the compute dtype
  Tensor forward(Ctx& ctx, const Tensor& x) override;
  // dy -> dx in x's dtype
  Tensor backward(Ctx& ctx, const Tensor& dy) override;
  // The input norm a caller may run itself, or null (see above).
  Norm* input_norm();
  // n = input_norm()(x) -> y; dy -> the gradient of n.
  Tensor forward_normed(Ctx& ctx, const Tensor& n);
  Tensor backward_normed(Ctx& ctx, const Tensor& dy);
  // Generation (forward only, nothing of attention's saved; batch-major, no sequence
  // parallelism): n (B, S, C), the normalized new rows of each entry ->
  // y (B, S, C). Their queries and keys are rotated at their true positions
  // (cache.start[b] + s), their keys and values written into the cache, and
  // each row attends to its entry's cached positions up to its own (a batch
  // whose entries all start at 0, a prompt, runs the fused causal kernel).
  Tensor forward_normed(Ctx& ctx, const Tensor& n, const KvCacheView& cache);
  std::vector<Module*> children() override { return {qkv_.get(), &proj_}; }

  const MultiheadAttentionConfig& config() const { return cfg_; }
  const ParallelContext& context() const { return *pc_; }
  bool partitioned() const;
  int64_t local_heads() const;
  int64_t local_kv_heads() const;
  // Ranks holding each KV head: T/Hkv when TP exceeds the KV heads, else 1.
  int64_t kv_replicas() const;
  Linear& qkv() { return *qkv_linear_; }
  Linear& proj() { return proj_; }
  // The attention-probability dropout mask of the forward saved in ctx:
  // (B, H_local, T, T) u8, 1 where kept; undefined when no dropout ran.
  // Regenerated from the dropout stream (the kernels never store it).
  Tensor dropout_mask(Ctx& ctx);

 private:
  struct Saved {
    Tensor qkv;  // (B, T, 3C/T) [or (T, B, 3C/T)] in the compute dtype
    kernels::AttentionSaved attention;
    kernels::AttentionConfig config;
    parallel::context::AttentionSaved cp;  // under context parallelism
    int64_t sequence = 0;                  // the whole sequence's positions
  };
  static MultiheadAttentionConfig checked(MultiheadAttentionConfig cfg, int tp_size);
  void check_input(const Tensor& x) const;
  // From the qkv activation to the projected output, and back to dqkv.
  Tensor attend(Ctx& ctx, const Tensor& qkv);
  Tensor attend_backward(Ctx& ctx, const Tensor& dy);
  Tensor attend_cached(Ctx& ctx, Tensor qkv, const KvCacheView& cache);
  // The attention kernel on s.qkv (rotated) into a new output (B, T, H_local·D).
  Tensor attention_core(Saved& s);
  // qkv: the layer's Linear (with its input norm when there is one).
  void build_qkv();
  kernels::RopeConfig rope_config(bool sequence_major) const;
  // The rotary table of this rank's positions of a sequence of `sequence`
  // (the whole table without context parallelism).
  const Tensor& rope_rows(int64_t sequence);
  int tp_size() const { return pc_->tp_size(); }
  // Replicated attention under sequence SP: gathers the sequence itself.
  bool gathers_sequence() const;

  ContextPtr pc_;
  MultiheadAttentionConfig cfg_;
  std::unique_ptr<Module> qkv_;  // LayerNormLinear with an input norm, else Linear
  Linear* qkv_linear_ = nullptr;
  LayerNormLinear* qkv_norm_ = nullptr;  // qkv_ when it has the input norm
  Linear proj_;
  kernels::AttentionWorkspace workspace_;
  Tensor rope_table_;  // rotary: (max_positions, D/2, 2) cos and sin
  Tensor cp_rope_;     // context parallelism: rope_table_'s rows of this rank's positions
  int64_t cp_rope_sequence_ = 0;
};

}  // namespace weft::nn
