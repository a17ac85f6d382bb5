// LayerNormMLP: the MLP of a block with its input norm (ln_2 + mlp).
//
//   x (..., C) [SP: this rank's tokens]
//     -> norm -> copy_to_tp [SP: gather_from_sp]
//     -> fc1 (C -> H/T, column-parallel) -> GELU                  (GPT-2)
//        fc1 (C -> 2H/T: [gate | up], column-parallel in 2 groups)
//        -> silu(gate) · up                                       (SwiGLU, Llama)
//     -> fc2 (H/T -> C, row-parallel) -> reduce_from_tp [SP: reduce_scatter_to_sp] -> + bias
//   -> y (..., C) [SP: this rank's tokens]
//
// forward_normed / backward_normed run the MLP after its norm, for a caller
// that runs norm() itself (fused with the residual add before it).
//
// fc1's bias is added by its GEMM (a oneDNN matmul bias) and GELU is a
// separate vectorized pass that keeps fc1's output (the pre-activation) for
// backward: oneDNN cannot write both the pre- and the post-activation from one
// matmul, and writing GELU as the matmul's post-op would make backward
// recompute the pre-activation with a second GEMM (see layernorm_mlp.cpp for
// the measurement). On a GPU cuBLASLt's epilogues write both (GELU_AUX_BIAS),
// and fc2's dgrad GEMM the GELU gradient and fc1's bias gradient
// (DGELU_BGRAD), where they apply (Linear::forward_gelu / backward_gelu).
//
// H (hidden) is 4·C by default. Under SwiGLU fc1's weight stacks Llama's
// gate_proj over up_proj (2H rows), split over TP group by group, so each
// rank holds the gate and up rows of its H/T hidden units and the product
// needs no communication. fc2 is a residual output projection: GPT-2
// initializes it with std init_std/√(2·layers). With Partition::replicate
// every rank holds the whole MLP and runs it on its own tokens (no
// communication); under SP its gradients are partial over the TP group.
//
// Collectives (TP > 1, partitioned):  forward                      backward
//   no SP                             1 all_reduce                 1 all_reduce
//   SP (seq or batch)                 1 all_gather + 1 reduce_scatter   the same
#pragma once

#include <memory>
#include <string>

#include "weft/nn/layernorm_linear.h"
#include "weft/nn/linear.h"
#include "weft/nn/partition.h"

namespace weft::nn {

enum class MlpKind { gelu, swiglu };
const char* mlp_kind_name(MlpKind k);  // "gelu", "swiglu"
MlpKind parse_mlp_kind(const std::string& name);

struct LayerNormMLPConfig {
  std::string name{};       // "h.3.mlp": parameters <name>.fc1.* and <name>.fc2.*
  std::string norm_name{};  // "h.3.ln_2": parameters <norm_name>.weight / .bias
  int64_t width = 0;        // C
  int64_t hidden = 0;       // 0: 4·C
  NormKind norm = NormKind::layer;
  float eps = 1e-5f;
  MlpKind activation = MlpKind::gelu;
  bool bias = true;  // fc1 and fc2
  Partition partition = Partition::tensor;
  float init_std = 0.02f;
  int64_t layers = 1;  // fc2's std is init_std/√(2·layers)
};

class LayerNormMLP : public Module {
 public:
  LayerNormMLP(ContextPtr context, LayerNormMLPConfig cfg);

  // x (..., C) -> y (..., C) in the compute dtype
  Tensor forward(Ctx& ctx, const Tensor& x) override;
  // dy (..., C) -> dx (..., C) in x's dtype
  Tensor backward(Ctx& ctx, const Tensor& dy) override;
  // n = norm()(x) (..., C) -> y (..., C); and dy -> the gradient of n.
  Tensor forward_normed(Ctx& ctx, const Tensor& n);
  Tensor backward_normed(Ctx& ctx, const Tensor& dy);
  Norm& norm() { return fc1_.norm(); }
  std::vector<Module*> children() override { return {&fc1_, &fc2_}; }

  const LayerNormMLPConfig& config() const { return cfg_; }
  const ParallelContext& context() const { return *pc_; }
  LayerNormLinear& fc1() { return fc1_; }
  Linear& fc2() { return fc2_; }

 private:
  struct Saved {
    Tensor h;  // fc1's output, before the activation
  };
  static LayerNormMLPConfig checked(LayerNormMLPConfig cfg);
  bool gated() const { return cfg_.activation == MlpKind::swiglu; }

  ContextPtr pc_;
  LayerNormMLPConfig cfg_;
  LayerNormLinear fc1_;
  Linear fc2_;
};

}  // namespace weft::nn
