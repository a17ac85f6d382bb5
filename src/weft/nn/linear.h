// Linear: y = x·Wᵀ + b with W (out, in), optionally tensor-parallel — a weight
// source, a GEMM schedule and an epilogue (the bias).
//
//   none    every rank holds W; no communication.
//   column  W split by output rows: each rank holds out/T rows (and that part
//           of b); x -> copy_to_tp -> local GEMM -> [gather_from_tp].
//   row     W split by input columns: each rank holds in/T columns; x (local
//           features) -> local GEMM -> reduce_from_tp -> + b (replicated).
// Under sequence parallelism (the context's sp) activations outside the pair
// are this rank's block of rows (tokens, see parallel/context.h): column
// runs all-gather→GEMM, row runs GEMM→reduce-scatter, on the tensors
// themselves.
//
// The weight comes from a parallel::WeightSource (weight_for_forward,
// weight_for_backward, weight_grad + finalize_weight_grad): the one
// make_weight_source picks for this layer's own parameter (weight_sources.h);
// LmHead passes the embedding's.
// The schedule (parallel/schedule.h) runs the GEMM with its collective and
// applies the bias rule.
//
// Backward, Megatron's order. Column under SP saves only the local input
// (1/T of the gathered one): it re-gathers it asynchronously while the dgrad
// GEMM runs, issues the dgrad reduce-scatter asynchronously, runs the wgrad
// GEMM, then waits (without SP the dgrad all-reduce overlaps the wgrad GEMM
// the same way). Row all-gathers the output gradient (under SP) before its
// dgrad GEMM and reuses it for wgrad.
//
// Comm-GEMM overlap: a Linear with an overlap_name (qkv, proj, fc1, fc2) takes
// each GEMM's method from the context's OverlapConfig — ring or pipeline for
// the forward and dgrad collectives (parallel/overlap/), bulk (the order
// above, also the default without a configuration) or off (each collective
// on its own) for the backward's.
//
// Quantized recipes (fp8-delayed, fp8-current, mxfp8, nvfp4; precision.h):
// a Linear that owns its weight has a GemmQuantizer and hands each GEMM the
// operands it returns (fprop: x and W row-wise; dgrad: dy row-wise and W
// column-wise; wgrad: dy and x column-wise). A Linear over another module's
// weight (the LM head) stays in the compute dtype.
//
// Initialization is TP-invariant: every rank draws the full master weight from
// (seed, name) and keeps its slice, so shards are bit-identical to slices of
// the TP=1 weight. `groups` > 1 splits the split dimension (a column-parallel
// layer's output rows, a row-parallel layer's input columns) into that many
// equal groups and shards each group separately: fused QKV, each rank holding
// its heads' q, k and v rows, laid out [q | k | v] locally too; the attention
// projection after grouped-query attention, whose input columns follow the
// query heads' blocks (nn/attention.h).
#pragma once

#include <cmath>
#include <memory>
#include <string>

#include "weft/nn/module.h"
#include "weft/parallel/context.h"
#include "weft/parallel/gemm_quantizer.h"
#include "weft/parallel/mappings.h"
#include "weft/parallel/overlap/bulk.h"
#include "weft/parallel/schedule.h"
#include "weft/parallel/weight_source.h"

namespace weft::nn {

using parallel::ContextPtr;
using parallel::ParallelContext;
using parallel::parse_sequence_parallel;
using parallel::sequence_parallel_name;
using parallel::SequenceParallel;

enum class Parallel { none, column, row };

struct LinearConfig {
  std::string name{};  // parameters become <name>.weight / <name>.bias
  int64_t in = 0, out = 0;
  Parallel mode = Parallel::none;
  bool bias = true;
  bool gather_output = false;     // column: return full output features
  bool input_is_parallel = true;  // row: input holds this rank's in/T features
  float init_std = 0.02f;
  int64_t groups = 1;
  // Column-parallel over fewer output positions than TP ranks (grouped-query
  // attention's qkv when TP exceeds the key/value heads, nn/attention.h): the
  // output rows are split at `positions` positions (0: the TP size), each
  // slice shared by TP/positions ranks (`share_group`, rank r at position
  // r mod positions), and of its `groups` blocks the first `dealt_groups`
  // are dealt among them (parallel::shared_split_spec).
  int positions = 0;
  int64_t dealt_groups = 0;
  std::shared_ptr<comm::ProcessGroup> share_group{};
  // The layer's name in the comm-GEMM overlap configuration (qkv, proj, fc1,
  // fc2; see parallel/overlap/config.h); empty: never overlapped beyond
  // Megatron's backward order.
  std::string overlap_name{};
};

class Linear : public Module {
 public:
  Linear(ContextPtr context, LinearConfig cfg);
  // A Linear over a weight another module owns (the source's parameter is not
  // one of this module's parameters).
  Linear(ContextPtr context, LinearConfig cfg, std::shared_ptr<parallel::WeightSource> source);

  // x (..., in or in/T) -> y (..., out or out/T)
  Tensor forward(Ctx& ctx, const Tensor& x) override;
  Tensor backward(Ctx& ctx, const Tensor& dy) override;
  std::vector<Parameter*> own_parameters() override;

  // GELU MLPs (LayerNormMLP), with cuBLASLt's epilogues where they apply: on
  // a GPU, bf16 outputs, no quantized recipe, and the GEMM this rank's plain
  // GEMM (no collective or comm-GEMM overlap splitting it), where
  // kernels::gemm_epilogue_fused says cuBLASLt takes the shape. Elsewhere
  // (the CPU always) they are exactly the unfused sequences below.
  //
  // forward() and the GELU of its output: pre = forward(x), act = gelu(pre);
  // fused, fc1's GEMM writes both (GELU_AUX_BIAS).
  struct Activated {
    Tensor pre, act;
  };
  Activated forward_gelu(Ctx& ctx, const Tensor& x);
  // backward() continued by the backward of the GELU that made this layer's
  // input from `pre`: d(pre) = backward(dy) ⊙ gelu'(pre). Fused, the dgrad
  // GEMM writes d(pre) and adds its column sums, the gradient of the bias
  // that produced `pre`, to `pre_bias_grad` when given (DGELU_BGRAD), and
  // `bias_grad_done` says so; unfused, the caller adds that gradient.
  struct GeluGrad {
    Tensor dpre;
    bool bias_grad_done = false;
  };
  GeluGrad backward_gelu(Ctx& ctx, const Tensor& dy, const Tensor& pre, Tensor* pre_bias_grad);
  // backward() leaving out this layer's bias gradient (already added by the
  // GEMM after it: backward_gelu's bias_grad_done).
  Tensor backward_without_bias_grad(Ctx& ctx, const Tensor& dy);

  // Selective recomputation (nn/recompute.h): drop the input this layer's
  // forward saved in ctx, and save it again from the recomputed input
  // before the backward (the layer's input as forward took it; not a row
  // layer that scatters its input itself).
  void release_saved_input(Ctx& ctx);
  void resave_input(Ctx& ctx, const Tensor& x);

  const LinearConfig& config() const { return cfg_; }
  const ParallelContext& context() const { return *pc_; }
  Parameter& weight() { return source_->parameter(); }
  Parameter* bias() { return cfg_.bias ? &bias_ : nullptr; }
  parallel::WeightSource& source() { return *source_; }
  int tp_size() const { return pc_->tp_size(); }
  int64_t local_in() const;
  int64_t local_out() const;

 private:
  struct Saved {
    Tensor x;  // the GEMM input: this rank's rows (column under SP: before the gather)
  };
  // The output gradient as the dgrad GEMM reads it (quantized under a
  // quantized recipe) and in high precision (the wgrad and bias gradients).
  struct Grads {
    Tensor dy{}, dy_hp{};
    // Native quantized GEMMs: the dgrad GEMM's operands (dy row-wise, the
    // weight's transposed copy); null otherwise.
    const QuantizedTensor* q_dy = nullptr;
    const QuantizedTensor* q_w = nullptr;
    // This layer's bias gradient (false: the caller has added it).
    bool bias_grad = true;
    // backward_gelu: the GELU input whose gradient the dgrad GEMM writes
    // fused, the bias gradient it adds, and whether it did (set here).
    const Tensor* gelu_pre = nullptr;
    Tensor* gelu_bias_grad = nullptr;
    bool* gelu_fused = nullptr;
  };
  Tensor backward_impl(Ctx& ctx, const Tensor& dy, Grads d);
  Tensor forward_impl(Ctx& ctx, const Tensor& x, Tensor* act);
  // Whether this layer's GEMMs may take a GemmEpilogue: a GPU, no quantized
  // recipe (the shape's answer is kernels::gemm_epilogue_fused's).
  bool epilogues() const;
  // The dgrad GEMM's options: the GELU backward epilogue where d asks for it
  // and it applies (`plain`: the dgrad is this rank's plain GEMM), else none.
  // `aux` holds the GELU input the options point to.
  kernels::GemmOptions dgrad_options(const Grads& d, bool plain, const Tensor& w, const Tensor& dx,
                                     Tensor& aux) const;
  Tensor backward_row(Ctx& ctx, const Tensor& x, const Grads& d, const Tensor& w);
  Tensor backward_column(Ctx& ctx, const parallel::Pending& xs, const Grads& d, const Tensor& w,
                         const parallel::overlap::BulkBackward& bulk, bool regather);
  void init(bool own_weight);
  // Column-parallel with its output rows at fewer positions than TP ranks.
  bool shares_rows() const;
  // The weight and bias parameters of a layer that shares rows.
  Parameter shared_parameter(const std::string& name, const Tensor& full, bool decay) const;
  // The TP group this layer communicates over: null when unpartitioned.
  comm::ProcessGroup* group() const;
  // Whether this layer's GEMMs of a pass multiply quantized operands
  // natively (GemmQuantizer::native_gemm): not under ring or pipeline
  // comm-GEMM overlap, and not where the schedule gathers an operand
  // (sequence parallelism's input all-gather: column fprop, row dgrad and
  // wgrad), which stay on the dequantized operands.
  bool native_quantized(bool backward) const;
  // Whether `wgrad` is this layer's weight's own gradient, which the first
  // micro-batch writes (marks the parameter grad_overwritten).
  bool write_grad(const Tensor& wgrad);
  // The wgrad GEMM: dW += dyᵀ · x (dW = in the step's first micro-batch,
  // PassContext::first_microbatch, where dW is the weight's own gradient), on the quantized
  // column-wise copies when native, else on the operands given (dequantized under a quantized
  // recipe). With `bias_grad`, db += Σ_rows dy as well, in the GEMM's epilogue (BGRADB) where it
  // fuses (returns true), else nothing (false): the caller runs kernels::bias_backward.
  bool wgrad_gemm(const ExecContext& gemm_context, Ctx& ctx, const Tensor& dy, const Tensor& x,
                  bool native, Tensor& wgrad, Tensor* bias_grad = nullptr);
  // A split backward (PassContext::defer_weight_grads, high-precision
  // recipes): queues the wgrad GEMM (and the bias gradient: in the GEMM, or
  // from bias_dy, else dy) on copies of its operands.
  void defer_wgrad(Ctx& ctx, const Tensor& dy, const Tensor& x, const Tensor& bias_dy,
                   bool bias_grad, bool bias_in_gemm);
  // The overlap choice for this layer's `pass` GEMM ("fprop", "dgrad", "wgrad").
  parallel::OverlapChoice overlap(const char* pass) const;
  std::string gemm_name(const char* pass) const { return cfg_.overlap_name + "_" + pass; }
  const Tensor* bias_ptr() const { return cfg_.bias ? &bias_.value : nullptr; }
  // The rank's scratch buffers (shared by every module on the context).
  parallel::Workspace& ws() const { return *pc_->workspace; }

  ContextPtr pc_;
  LinearConfig cfg_;
  // weight_ is the weight as built; the source made from it keeps it or
  // takes it over (make_weight_source). Unused over an external source.
  Parameter weight_, bias_;
  std::shared_ptr<parallel::WeightSource> source_;
  std::unique_ptr<parallel::GemmQuantizer> quantizer_;  // quantized recipes only
  bool owns_source_ = false;                            // the source's parameter is this layer's
};

// The Linear that closes a residual branch of a block (attention's proj, the
// MLP's fc2): row-parallel when the block is partitioned, so that it takes
// the split hidden state as it is, and initialized with std/√(2·layers) as
// in GPT-2; `bias` false for Llama's bias-free blocks; `groups` as LinearConfig's.
LinearConfig residual_projection(bool partitioned, std::string name, int64_t in, int64_t out,
                                 float init_std, int64_t layers, std::string overlap_name,
                                 bool bias = true, int64_t groups = 1);

}  // namespace weft::nn
