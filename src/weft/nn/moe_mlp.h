// MoeMLP: a Mixture-of-Experts MLP with its input norm, in place of
// LayerNormMLP in the layers GptConfig makes MoE (Mixtral's block).
//
//   x (..., C) -> norm -> n (N, C)
//   n -> router (replicated) -> top-k experts and gates per token
//   n -> dispatch (rows sorted by (expert, token)) -> xp (M, C)
//     -> fc1 (GroupedLinear C -> H/T, or 2H/T as [gate | up] under SwiGLU,
//        column-parallel) -> GELU or silu(gate)·up
//     -> fc2 (GroupedLinear H/T -> C, row-parallel: partial sums)
//   -> combine (Σ gate · expert output per token) -> reduce_from_tp
//   -> y (..., C)
//
// Parameters: <norm_name>.weight [.bias], <name>.router.weight (E, C),
// <name>.fc1.experts.<e>.weight, <name>.fc2.experts.<e>.weight; the experts
// have no biases (Mixtral's). fc2 is a residual projection: its std is
// init_std/√(2·layers).
//
// Tensor parallelism splits every expert as the dense MLP is split: combine
// is linear, so it runs on the partial sums and one all-reduce of (N, C)
// follows it, as after a dense fc2. The gates' gradient <dy, o> then needs
// the full o: each rank's dot with its partial o is all-reduced instead
// (N·k floats). The router sees the same tokens on every rank and routes
// identically; its gradient is added after the experts' all-reduced one.
//
// Expert parallelism (the context's ep group, P ranks, each with its own
// tokens): each rank holds E/P experts (nn/grouped_linear.h); after dispatch
// the rows travel to their experts' ranks and the experts' outputs back
// (nn/moe_exchange.h), so routing, dispatch and combine stay local. TP splits
// each expert inside that, as above: a rank exchanges rows with the ep peers
// of its own TP coordinate, which route the same tokens as it does.
//
// Collectives (TP > 1, partitioned): forward 1 all_reduce (N, C); backward 1
// all_reduce (N·k) + 1 all_reduce (N, C). EP > 1 adds, per direction, two
// all_to_all of rows (variable chunks) and, in forward, one of the E counts.
// Sequence parallelism: the block's input and output are this rank's rows
// (with replicated experts each rank then routes and computes its own rows);
// the normalized tokens are all-gathered over TP before routing (every rank
// routes every token of the group, as without SP) and the combined output
// reduce-scattered back to rows (in place of the all-reduce). Dropless
// routing is independent of the token order; with a capacity factor the
// order decides which slots are dropped, and under --sp seq the tokens are
// sequence-major (parallel/context.h), so drops can differ from --sp off.
#pragma once

#include <string>

#include "weft/nn/grouped_linear.h"
#include "weft/nn/layernorm_mlp.h"
#include "weft/nn/moe_exchange.h"
#include "weft/nn/norm.h"
#include "weft/nn/router.h"

namespace weft::nn {

struct MoeMLPConfig {
  std::string name{};       // "h.3.mlp"
  std::string norm_name{};  // "h.3.ln_2"
  int64_t width = 0;        // C
  int64_t hidden = 0;       // H per expert; 0: 4·C
  NormKind norm = NormKind::layer;
  float eps = 1e-5f;
  MlpKind activation = MlpKind::gelu;
  Partition partition = Partition::tensor;  // the experts; the router is always replicated
  float init_std = 0.02f;
  int64_t layers = 1;  // fc2's std is init_std/√(2·layers)
  int64_t experts = 4;
  int64_t top_k = 2;
  float capacity_factor = 0.0f;  // 0: dropless
  float aux_coef = 0.01f;
  float z_coef = 0.0f;
};

class MoeMLP : public Module {
 public:
  MoeMLP(ContextPtr context, MoeMLPConfig cfg);

  // x (..., C) -> y (..., C) in the compute dtype
  Tensor forward(Ctx& ctx, const Tensor& x) override;
  // dy (..., C) -> dx (..., C) in x's dtype; the router's auxiliary losses'
  // gradients join (router().set_loss_scale).
  Tensor backward(Ctx& ctx, const Tensor& dy) override;
  std::vector<Module*> children() override { return {&norm_, &router_, &fc1_, &fc2_}; }

  const MoeMLPConfig& config() const { return cfg_; }
  Router& router() { return router_; }
  GroupedLinear& fc1() { return fc1_; }
  GroupedLinear& fc2() { return fc2_; }

 private:
  struct Saved {
    Tensor h;  // fc1's output, before the activation
    Tensor o;  // fc2's output (this rank's partial sums under TP), in dispatch order
    Shape shape;
    ExpertExchange plan;  // expert parallelism: who sends whom which rows
  };
  static MoeMLPConfig checked(MoeMLPConfig cfg, const ParallelContext& pc);
  bool gated() const { return cfg_.activation == MlpKind::swiglu; }
  // The TP group the experts are split over: null when unpartitioned.
  comm::ProcessGroup* group() const;
  // The expert-parallel group when it has more than one rank, else null.
  comm::ProcessGroup* expert_group() const;
  // Into and out of the block: copy_to_tp / reduce_from_tp, or under
  // sequence parallelism gather_from_sp / reduce_scatter_to_sp.
  parallel::Mapping entry() const;
  parallel::Mapping exit() const;

  ContextPtr pc_;
  MoeMLPConfig cfg_;
  Norm norm_;
  Router router_;
  GroupedLinear fc1_, fc2_;
};

}  // namespace weft::nn
