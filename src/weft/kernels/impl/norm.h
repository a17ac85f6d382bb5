// The implementations of kernels/norm.h, one template per kernel:
// kernels/cpu/norm.cpp and kernels/cuda/ define the Backend::cpu and
// Backend::cuda specializations. Only kernels/norm.cpp calls them, after
// checking the arguments.
//
// LayerNorm and RMSNorm (kernels/norm.h), fixed-block reductions on both
// backends. The forwards take the residual add with them: `residual` null
// normalizes x itself; otherwise the norm reads residual->sum = x +
// dropout(branch), written first.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/dispatch.h"
#include "weft/kernels/norm.h"

namespace weft::kernels::impl {

// The residual add in front of a norm: sum = x + dropout(branch), mask
// written when dropout.p > 0.
struct ResidualAdd {
  const Tensor& branch;
  const ResidualDropout& dropout;
  Tensor& sum;
  Tensor& mask;
};

template <Backend B>
void layer_norm_forward(const ExecContext& ec, const Tensor& x, const ResidualAdd* residual,
                        const Tensor& gamma, const Tensor& beta, float eps, Tensor& y, Tensor& mean,
                        Tensor& rstd);
template <Backend B>
void layer_norm_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                         const Tensor& gamma, const Tensor& mean, const Tensor& rstd, Tensor& dx,
                         Tensor& dgamma, Tensor& dbeta, const ResidualGrad& residual);
template <Backend B>
void rms_norm_forward(const ExecContext& ec, const Tensor& x, const ResidualAdd* residual,
                      const Tensor& gamma, float eps, Tensor& y, Tensor& rstd);
template <Backend B>
void rms_norm_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                       const Tensor& gamma, const Tensor& rstd, Tensor& dx, Tensor& dgamma,
                       const ResidualGrad& residual);

}  // namespace weft::kernels::impl
