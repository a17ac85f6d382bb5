// GroupedLinear: E experts' Linear layers (no bias, as Mixtral's experts),
// each applied to its own block of rows.
//
//   x (M, in or in/T): rows grouped by expert, counts[e] rows for expert e
//   -> y (M, out or out/T): y_e = x_e · W_eᵀ
//
// One Parameter per expert, <name>.experts.<e>.weight (out, in), so that
// checkpoints and Hugging Face's Mixtral (…experts.<e>.w1.weight) map expert
// by expert. Each is drawn from (seed, its name) and split as Linear splits
// its weight (sharded_parameter): column-parallel by output rows (`groups`
// as Linear's: SwiGLU's [gate | up]), row-parallel by input columns. The
// layer itself never communicates: a row-parallel GroupedLinear returns this
// rank's partial sums, and its caller (nn/moe_mlp.h) reduces them once after
// combining the experts' outputs, as a row-parallel Linear's all-reduce would.
//
// Expert parallelism (the context's ep group of P ranks): rank q holds
// experts [q·E/P, (q+1)·E/P) only, their parameters named by the global
// index, not replicated over "ep" (the others' names are
// own_parameters_elsewhere()). Its rows come from every rank of the group
// (nn/moe_exchange.h), so its weight gradients sum P ranks' tokens where a
// replicated weight's sum one rank's: they are scaled by 1/P, and the data
// groups' average (gtp, dp) makes them the mean over every replica's loss.
//
// Each expert's weight comes from a WeightSource, as every Linear's does
// (make_weight_source): under generalized tensor parallelism each expert's
// weight is sharded 1/N over the gtp group and gathered just in time along
// the prefetch chain, and under a quantized recipe each expert has its own
// GemmQuantizer, so every expert keeps its own amax history and the step's
// end reduces all of them in the one collective that reduces every amax
// (parallel/scaling.h). Under GTP the local experts are fetched as one
// batch by default (make_weight_batch, gtp::SourceBatch;
// gtp::Options::batch_experts): one all-gather brings every expert's weight
// (quantized: every expert's data and scales) and one reduce-scatter reduces
// every expert's gradient, the batch one event of the prefetch chain (the
// next layer's gather in flight while this one's GEMMs run). The trade-off:
// all E local experts' gathered weights (and, in backward, their full-size
// f32 gradients) are resident at once — with the prefetch, two such layers'
// — where one expert at a time (batch_experts off: each expert its own chain
// event, the next expert's gather in flight while this one computes) holds
// two experts' weights; batching saves E - 1 collectives per use and pass.
//
// The GEMMs are a loop over the local experts: fetch the expert's weight
// (or take it from the batch), multiply its row block (a view, no copy); no
// single grouped kernel call. Under bf16 on the CPU an expert's few hundred
// rows would pay oneDNN's copy of the weight into its blocked layout in every
// product, so experts with a plain source read their weight packed
// (WeightSource::packed_weight: a plain source packs once per cast, i.e. once per
// optimizer step when the passes reuse casts, as the trainer's do; the
// products are bit for bit the plain ones). At GPT-2-small width 8 experts run at 0.9x or more of
// one dense GEMM of the same total size (`weft bench gemm`, the grouped row). Experts without rows
// skip their GEMMs but still fetch their weights and finalize their (zero) gradients, so that every
// pass asks for the same weights in the same order (the prefetch chain records it).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "weft/nn/linear.h"
#include "weft/nn/module.h"
#include "weft/parallel/gemm_quantizer.h"

namespace weft::nn {

struct GroupedLinearConfig {
  std::string name{};  // parameters <name>.experts.<e>.weight
  int64_t experts = 0;
  int64_t in = 0, out = 0;
  Parallel mode = Parallel::none;  // column, row or none, as Linear's
  float init_std = 0.02f;
  int64_t groups = 1;  // as LinearConfig::groups
};

class GroupedLinear : public Module {
 public:
  GroupedLinear(ContextPtr context, GroupedLinearConfig cfg);

  // x (M, local in) in the compute dtype, counts (local experts) summing to M
  // -> y (M, local out) in the compute dtype.
  Tensor forward(Ctx& ctx, const Tensor& x, std::span<const int64_t> counts);
  // Every call needs the counts: the overload without them is an error.
  Tensor forward(Ctx& ctx, const Tensor& x) override;
  // dy (M, local out) -> dx (M, local in); dW_e += dy_eᵀ · x_e.
  Tensor backward(Ctx& ctx, const Tensor& dy) override;
  std::vector<Parameter*> own_parameters() override;
  std::vector<std::string> own_parameters_elsewhere() override;

  const GroupedLinearConfig& config() const { return cfg_; }
  // The experts this rank holds: [first_expert(), + local_experts()).
  int64_t local_experts() const { return cfg_.experts / pc_->ep_size(); }
  int64_t first_expert() const { return pc_->ep_rank() * local_experts(); }
  // Local expert e (global index first_expert() + e).
  Parameter& weight(int64_t e) { return sources_[static_cast<size_t>(e)]->parameter(); }
  parallel::WeightSource& source(int64_t e) { return *sources_[static_cast<size_t>(e)]; }
  // Whether the local experts' weights are fetched as one batch (GTP's
  // batched all-gather and reduce-scatter; see the header).
  bool batched() const { return batch_ != nullptr; }
  int64_t local_in() const;
  int64_t local_out() const;

 private:
  struct Saved {
    Tensor x;
    std::vector<int64_t> counts;
  };
  static GroupedLinearConfig checked(GroupedLinearConfig cfg, int tp, int ep);
  std::string expert_name(int64_t global_expert) const;  // "h.0.mlp.fc1.experts.3"
  std::string weight_name(int64_t global_expert) const;
  // Local expert e's weight as a packed bf16 operand, where its source keeps
  // one (WeightSource::packed_weight: a plain source) under the bf16 recipe;
  // null otherwise (the products read the weight itself).
  const kernels::PackedWeight* packed(size_t e, bool backward, Ctx& ctx) const;

  ContextPtr pc_;
  GroupedLinearConfig cfg_;
  // The weights as built (a source keeps or takes over its own), reserved
  // once: the plain sources refer to them.
  std::vector<Parameter> weights_;
  std::vector<std::shared_ptr<parallel::WeightSource>> sources_;
  std::vector<std::unique_ptr<parallel::GemmQuantizer>> quantizers_;  // quantized recipes only
  std::vector<parallel::GemmQuantizer*> quantizer_ptrs_;
  // The experts' weights fetched together (GTP's batched gathers), or null:
  // declared last, so that it goes before the sources it refers to.
  std::unique_ptr<parallel::WeightBatch> batch_;
};

}  // namespace weft::nn
