// LayerNorm and RMSNorm over the last dimension, as modules.
//
// The parameters (weight = gamma, initialized to 1; LayerNorm's bias = beta,
// 0) are f32 and replicated: a norm never communicates. Inside a TP group of
// more than one rank they are replicated over "tp" as well as "dp"; under
// sequence parallelism each rank normalizes only its own tokens, so their
// gradients are partial sums over the TP group: grad_sum_group is the group,
// and summing before use keeps the replicas from ever drifting apart.
//
// The statistics and the arithmetic are f32 (the kernel's), computed in the
// input's dtype. A norm is where a branch reads the residual stream: its
// output is in the context's compute dtype (what the GEMM after it reads) and
// backward returns dx in the stream's dtype (the input's).
//
// In a pre-norm block the stream is updated just before a norm reads it:
// forward_add takes the update with it (sum = x + dropout(branch), then the
// norm of sum, one pass over the rows) and backward_add adds the stream's
// gradient (and takes the branch's gradient through its dropout) in the
// norm's own backward pass. Both give bitwise what the separate kernels give.
#pragma once

#include <memory>
#include <string>

#include "weft/kernels/norm.h"
#include "weft/nn/linear.h"
#include "weft/nn/module.h"

namespace weft::nn {

enum class NormKind { layer, rms };
const char* norm_kind_name(NormKind k);  // "layernorm", "rmsnorm"

struct NormConfig {
  std::string name{};  // parameters <name>.weight [, <name>.bias]
  int64_t width = 0;   // C, the normalized (last) dimension
  float eps = 1e-5f;
};

class Norm : public Module {
 public:
  Norm(NormKind kind, ContextPtr context, NormConfig cfg);

  // x (..., C) -> y (..., C) in the compute dtype
  Tensor forward(Ctx& ctx, const Tensor& x) override;
  // dy (..., C) -> dx (..., C) in x's dtype; dweight (and dbias) accumulate
  Tensor backward(Ctx& ctx, const Tensor& dy) override;

  struct AddOutputs {
    Tensor sum;   // x + dropout(branch), in x's dtype: what this norm normalized
    Tensor y;     // norm(sum) in the compute dtype
    Tensor mask;  // the dropout decisions (u8, x's shape); undefined without dropout
  };
  // x (..., C), branch (..., C) (converted to x's dtype) -> the residual
  // update and its norm; backward (or backward_add) takes the gradient of y.
  AddOutputs forward_add(Ctx& ctx, const Tensor& x, const Tensor& branch,
                         const kernels::ResidualDropout& dropout = {});

  struct AddGrads {
    Tensor dx;       // norm'(dy) + dres, in x's dtype
    Tensor dbranch;  // dx through the branch's dropout, in the compute dtype
  };
  // dy: the gradient of y; dres: the stream's gradient past the norm (the
  // sum's other reader), in x's dtype or the compute dtype. mask and p: the
  // forward's dropout (undefined mask: none, and dbranch is dx).
  AddGrads backward_add(Ctx& ctx, const Tensor& dy, const Tensor& dres, const Tensor& mask = {},
                        float p = 0.0f);
  std::vector<Parameter*> own_parameters() override;

  NormKind kind() const { return kind_; }
  const NormConfig& config() const { return cfg_; }
  const ParallelContext& context() const { return *pc_; }
  Parameter& weight() { return weight_; }
  Parameter* bias() { return kind_ == NormKind::layer ? &bias_ : nullptr; }

 private:
  struct Saved {
    Tensor x, mean, rstd;
  };
  void check_input(const Tensor& x) const;
  // The statistics' tensors of a forward on x, in s.
  void make_stats(Saved& s, const Tensor& x) const;
  // dy -> dx (in s.x's dtype) with the residual gradient r; releases s.
  Tensor run_backward(Ctx& ctx, const Tensor& dy, const kernels::ResidualGrad& r);

  NormKind kind_;
  ContextPtr pc_;
  NormConfig cfg_;
  Parameter weight_, bias_;
};

class LayerNorm : public Norm {
 public:
  LayerNorm(ContextPtr context, NormConfig cfg)
      : Norm(NormKind::layer, std::move(context), std::move(cfg)) {}
};

class RMSNorm : public Norm {
 public:
  RMSNorm(ContextPtr context, NormConfig cfg)
      : Norm(NormKind::rms, std::move(context), std::move(cfg)) {}
};

}  // namespace weft::nn
