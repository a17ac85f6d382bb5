// Layer normalization and RMS normalization over the last dimension.
//
// x is f32 or bf16 and y takes the dtype of its tensor; gamma and beta are
// f32; statistics are computed and saved in f32. Backward accumulates into
// dgamma/dbeta (+=), so gradient accumulation across microbatches is free;
// their reduction over rows uses fixed blocks, so results are bitwise the same
// for any thread count. The CPU sums a row in 16 lanes added pairwise at the
// end, the same order on every instruction set.
//
// Pre-norm blocks update the residual stream just before a norm reads it, and
// add the stream's gradient just after the norm's backward: the add_* forms
// and ResidualGrad do both in the norm's own pass over the rows, bitwise what
// the separate kernels compute one after the other.
#pragma once

#include <cstdint>

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::kernels {

// Where a row of a residual activation draws its dropout numbers: row r at
// stream row r (segment 0), or under context parallelism, whose rows are
// chunks of longer sequences, at its row in the whole batch: the rows come
// in groups of two segments of `segment` rows, group g's segment i starting
// at stream row g·group_stride + start[i] (parallel/context/chunks.h).
struct DropoutRows {
  int64_t segment = 0;
  int64_t group_stride = 0;
  int64_t start[2] = {0, 0};

  int64_t stream_row(int64_t r) const {
    if (segment == 0) return r;
    return r / (2 * segment) * group_stride + start[(r / segment) % 2] + r % segment;
  }
};

// Inverted dropout on a residual branch before it joins the stream: element
// (r, j) of a row of c elements is kept when uniform_at(seed, offset,
// rows.stream_row(r)·c + j) >= p (random.h) and scaled by 1/(1-p), exactly as
// dropout_forward (element r·c + j). p = 0: no dropout. A row map (CPU
// kernels only) keys a chunk's rows by their place in the whole sequence.
struct ResidualDropout {
  float p = 0.0f;
  uint64_t seed = 0, offset = 0;
  DropoutRows rows{};
};

// What the residual stream adds to a norm's backward (every field optional):
//   dx = norm'(dy) + dres        dres: the stream's gradient that bypasses the norm
//   dbranch = dx·mask/(1-p)      the gradient of the branch that joined the
//                                stream through dropout (mask u8 of x's size)
// bitwise the norm's backward, add and dropout_backward run one after the
// other. dres, dbranch and dx are distinct tensors of x's dtype and size.
struct ResidualGrad {
  const Tensor* dres = nullptr;
  const Tensor* mask = nullptr;
  float p = 0.0f;
  Tensor* dbranch = nullptr;
};

// x (N,C), gamma (C), beta (C) -> y (N,C), mean (N), rstd (N)
void layer_norm_forward(const ExecContext& ec, const Tensor& x, const Tensor& gamma,
                        const Tensor& beta, float eps, Tensor& y, Tensor& mean, Tensor& rstd);
// dy (N,C), x (N,C), gamma (C), mean (N), rstd (N) -> dx (N,C); dgamma (C) +=, dbeta (C) +=
void layer_norm_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                         const Tensor& gamma, const Tensor& mean, const Tensor& rstd, Tensor& dx,
                         Tensor& dgamma, Tensor& dbeta, const ResidualGrad& residual = {});

// x (N,C), gamma (C) -> y (N,C) = x * rstd * gamma, rstd (N) = 1/sqrt(mean(x²) + eps)
void rms_norm_forward(const ExecContext& ec, const Tensor& x, const Tensor& gamma, float eps,
                      Tensor& y, Tensor& rstd);
// dy (N,C), x (N,C), gamma (C), rstd (N) -> dx (N,C); dgamma (C) +=
void rms_norm_backward(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                       const Tensor& gamma, const Tensor& rstd, Tensor& dx, Tensor& dgamma,
                       const ResidualGrad& residual = {});

// x (N,C), branch (N,C) -> sum (N,C) = x + dropout(branch), then the norm of
// sum as above: y (N,C) and its statistics. mask (u8, N·C) records the
// dropout decisions when dropout.p > 0 (and is not touched otherwise). x,
// branch, sum and y share one dtype; sum is a tensor of its own.
void add_layer_norm_forward(const ExecContext& ec, const Tensor& x, const Tensor& branch,
                            const ResidualDropout& dropout, const Tensor& gamma, const Tensor& beta,
                            float eps, Tensor& sum, Tensor& y, Tensor& mean, Tensor& rstd,
                            Tensor& mask);
void add_rms_norm_forward(const ExecContext& ec, const Tensor& x, const Tensor& branch,
                          const ResidualDropout& dropout, const Tensor& gamma, float eps,
                          Tensor& sum, Tensor& y, Tensor& rstd, Tensor& mask);

}  // namespace weft::kernels
