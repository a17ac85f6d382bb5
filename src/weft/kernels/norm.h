// Layer normalization and RMS normalization over the last dimension.
//
// x is f32 or bf16 and y takes the dtype of its tensor; gamma and beta are
// f32; statistics are computed and saved in f32. Backward accumulates into
// dgamma/dbeta (+=), so gradient accumulation across microbatches is free;
// their reduction over rows uses fixed blocks, so results are bitwise the same
// for any thread count.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::kernels {

// x (N,C), gamma (C), beta (C) -> y (N,C), mean (N), rstd (N)
void layer_norm_forward(const ExecContext& ec, const Tensor& x, const Tensor& gamma,
                        const Tensor& beta, float eps, Tensor& y, Tensor& mean, Tensor& rstd);
// dy (N,C), x (N,C), gamma (C), mean (N), rstd (N) -> dx (N,C); dgamma (C) +=, dbeta (C) +=
void layer_norm_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                         const Tensor& gamma, const Tensor& mean, const Tensor& rstd, Tensor& dx,
                         Tensor& dgamma, Tensor& dbeta);

// x (N,C), gamma (C) -> y (N,C) = x * rstd * gamma, rstd (N) = 1/sqrt(mean(x²) + eps)
void rms_norm_forward(const ExecContext& ec, const Tensor& x, const Tensor& gamma, float eps,
                      Tensor& y, Tensor& rstd);
// dy (N,C), x (N,C), gamma (C), rstd (N) -> dx (N,C); dgamma (C) +=
void rms_norm_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                       const Tensor& gamma, const Tensor& rstd, Tensor& dx, Tensor& dgamma);

// Transition: the forms without a context, until nn/ and parallel/ are migrated (issue 11).
inline void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                               Tensor& y, Tensor& mean, Tensor& rstd) {
  layer_norm_forward(ExecContext::host(), x, gamma, beta, eps, y, mean, rstd);
}
inline void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dgamma,
                                Tensor& dbeta) {
  layer_norm_backward(ExecContext::host(), dy, x, gamma, mean, rstd, dx, dgamma, dbeta);
}
inline void rms_norm_forward(const Tensor& x, const Tensor& gamma, float eps, Tensor& y,
                             Tensor& rstd) {
  rms_norm_forward(ExecContext::host(), x, gamma, eps, y, rstd);
}
inline void rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                              const Tensor& rstd, Tensor& dx, Tensor& dgamma) {
  rms_norm_backward(ExecContext::host(), dy, x, gamma, rstd, dx, dgamma);
}

}  // namespace weft::kernels
