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

  // x (M, local in) in the compute dtype, counts (E) summing to M
  // -> y (M, local out) in the compute dtype.
  Tensor forward(Ctx& ctx, const Tensor& x, std::span<const int64_t> counts);
  // Every call needs the counts: the overload without them is an error.
  Tensor forward(Ctx& ctx, const Tensor& x) override;
  // dy (M, local out) -> dx (M, local in); dW_e += dy_eᵀ · x_e.
  Tensor backward(Ctx& ctx, const Tensor& dy) override;
  std::vector<Parameter*> own_parameters() override;

  const GroupedLinearConfig& config() const { return cfg_; }
  Parameter& weight(int64_t e) { return weights_[static_cast<size_t>(e)]; }
  int64_t local_in() const;
  int64_t local_out() const;

 private:
  struct Saved {
    Tensor x;
    std::vector<int64_t> counts;
    std::vector<Tensor> w;  // the weights as the forward read them
  };
  static GroupedLinearConfig checked(GroupedLinearConfig cfg, int tp);

  ContextPtr pc_;
  GroupedLinearConfig cfg_;
  std::vector<Parameter> weights_;
};

}  // namespace weft::nn
