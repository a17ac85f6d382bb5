// LayerNormLinear: a norm fused with the column-parallel Linear after it
// (Transformer Engine's module of that name; ln_1 + qkv of a GPT-2 block).
//
//   x (..., in) [SP: this rank's tokens]
//     -> norm (local tokens)                      = n
//     -> copy_to_tp        [SP: gather_from_sp]   (Megatron order: the norm
//     -> column GEMM                                runs before the gather)
//   -> y (..., out/T) [SP: every token]
//
// Only column-parallel (or unpartitioned: mode none) exists: a row-parallel
// layer reads features split over the TP group, which a norm over the full
// width cannot produce; asking for row is an error.
//
// return_layernorm_output makes forward_both return n as well (in the layout
// of x), and backward_both take its gradient, added to the gradient the GEMM
// sends back before the norm's backward.
//
// forward_normed / backward_normed are the Linear alone, for a caller that
// runs the norm itself (fused with the residual add before it: Norm's
// forward_add and backward_add): they take n and return its gradient.
//
// Collectives (TP > 1, partitioned):  forward        backward
//   no SP                             0              1 all_reduce
//   SP (seq or batch)                 1 all_gather   1 reduce_scatter
#pragma once

#include <memory>
#include <string>

#include "weft/nn/linear.h"
#include "weft/nn/module.h"
#include "weft/nn/norm.h"

namespace weft::nn {

struct LayerNormLinearConfig {
  std::string name{};       // the linear's parameters: <name>.weight / <name>.bias
  std::string norm_name{};  // the norm's parameters: <norm_name>.weight / .bias
  int64_t in = 0, out = 0;
  Parallel mode = Parallel::column;  // column or none (row is an error)
  bool bias = true;
  NormKind norm = NormKind::layer;
  float eps = 1e-5f;
  float init_std = 0.02f;
  int64_t groups = 1;  // fused QKV: 3
  // Output rows shared by several TP ranks (LinearConfig's fields).
  int positions = 0;
  int64_t dealt_groups = 0;
  std::shared_ptr<comm::ProcessGroup> share_group{};
  bool return_layernorm_output = false;
  std::string overlap_name{};  // the linear's name in the overlap configuration
};

class LayerNormLinear : public Module {
 public:
  LayerNormLinear(ContextPtr context, LayerNormLinearConfig cfg);

  struct Outputs {
    Tensor y;     // (..., out/T)
    Tensor norm;  // (..., in), the layout of x; only with return_layernorm_output
  };
  Outputs forward_both(Ctx& ctx, const Tensor& x);
  // dnorm: the gradient of Outputs::norm (may be undefined: zero).
  Tensor backward_both(Ctx& ctx, const Tensor& dy, const Tensor& dnorm);

  // n = norm(x) (..., in), computed by the caller -> y (..., out/T)
  Tensor forward_normed(Ctx& ctx, const Tensor& n) { return linear_.forward(ctx, n); }
  // dy -> the gradient of n (dnorm added when defined); the caller runs the norm's backward.
  Tensor backward_normed(Ctx& ctx, const Tensor& dy, const Tensor& dnorm = {});

  // x (..., in) -> y (..., out/T)
  Tensor forward(Ctx& ctx, const Tensor& x) override { return forward_both(ctx, x).y; }
  Tensor backward(Ctx& ctx, const Tensor& dy) override { return backward_both(ctx, dy, {}); }
  std::vector<Module*> children() override { return {&norm_, &linear_}; }

  const LayerNormLinearConfig& config() const { return cfg_; }
  Norm& norm() { return norm_; }
  Linear& linear() { return linear_; }

 private:
  static LayerNormLinearConfig checked(LayerNormLinearConfig cfg);

  LayerNormLinearConfig cfg_;
  Norm norm_;
  Linear linear_;
};

}  // namespace weft::nn
