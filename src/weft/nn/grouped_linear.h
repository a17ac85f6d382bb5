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
// The GEMMs are a loop over experts of kernels::gemm on row blocks (views, no
// copies). kernels::batched_gemm needs equal shapes: padding every expert to
// the largest count would cost (E · max − M) rows of wasted work and two
// copies per direction, more than the E−1 extra calls save at these sizes.
// Experts with no rows are skipped. The weights are cast to the compute dtype
// once per forward; quantized recipes (FP8, NVFP4) do not reach the experts
// yet: they run in the compute dtype.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "weft/nn/linear.h"
#include "weft/nn/module.h"

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
  Parameter& weight(int64_t e) { return weights_[static_cast<size_t>(e)]; }
  int64_t local_in() const;
  int64_t local_out() const;

 private:
  struct Saved {
    Tensor x;
    std::vector<int64_t> counts;
    std::vector<Tensor> w;  // the weights as the forward read them
  };
  static GroupedLinearConfig checked(GroupedLinearConfig cfg, int tp, int ep);
  std::string weight_name(int64_t global_expert) const;

  ContextPtr pc_;
  GroupedLinearConfig cfg_;
  std::vector<Parameter> weights_;
};

}  // namespace weft::nn
