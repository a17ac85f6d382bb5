// Vocab-parallel cross-entropy: softmax cross-entropy over logits whose
// vocabulary (columns) is split over the TP group, without ever gathering the
// logits (Megatron's vocab_parallel_cross_entropy).
//
// Each rank holds the columns [r·Vp/T, (r+1)·Vp/T) of the padded vocabulary
// (Vp, see embedding.h); columns >= vocab are padding and never contribute to
// the loss or its gradient, and the rows whose target is ignore_index are not
// counted. Forward, per row n:
//   m[n]       = all_reduce_max(max over the local valid columns)
//   z[n], s[n] = all_reduce_sum(target logit if held here else 0,
//                               Σ_local exp(logits - m[n]))     (one call, 2N floats)
//   loss       = mean over counted rows of m + log s - z        (the same on every rank)
// Backward is local: dlogits = (softmax - onehot(target)) · dloss / count on
// this rank's columns.
//
// Collectives per call (TP > 1): forward 2 all_reduce (max of N, sum of 2N
// floats), backward 0; the same with and without sequence parallelism (the
// logits cover the whole TP group's tokens: LmHead gathers them).
#pragma once

#include <memory>

#include "weft/comm/process_group.h"
#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"
#include "weft/kernels/loss.h"

namespace weft::nn {

struct CrossEntropyConfig {
  int64_t vocab = 0;                         // real vocabulary size V
  std::shared_ptr<comm::ProcessGroup> tp{};  // null: the logits hold the whole vocabulary
  int32_t ignore_index = kernels::kIgnoreIndex;
  ExecContext exec{};  // where the kernels run
  // The targets were checked on the host (kernels::CrossEntropyOptions::
  // targets_checked): a GPU reads nothing back.
  bool targets_checked = false;
};

// logits (..., Vp/T) f32|bf16, this rank's vocabulary slice; targets (...) i32
// with the logits' leading shape -> the mean loss over the counted rows,
// bitwise the same on every rank of the group; lse (rows) f32 is written for
// the backward. Targets outside [0, vocab) other than ignore_index throw.
float vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets, Tensor& lse,
                                   const CrossEntropyConfig& cfg);
// The same, the result left where the logits are: loss (f32, two elements)
// = {the mean loss, the number of scored rows} (kernels::cross_entropy_combine).
void vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets, Tensor& lse,
                                  Tensor& loss, const CrossEntropyConfig& cfg);

// logits, targets, lse from the forward -> dlogits (logits' shape) = the
// gradient of dloss·loss on this rank's columns; no communication. dlogits
// may be logits itself (same dtype): the gradient then overwrites the logits.
// `counted`: the forward's loss tensor, whose count scales the gradient on
// the device (null: the rows are counted again).
void vocab_parallel_cross_entropy_backward(const Tensor& logits, const Tensor& targets,
                                           const Tensor& lse, float dloss, Tensor& dlogits,
                                           const CrossEntropyConfig& cfg,
                                           const Tensor* counted = nullptr);

}  // namespace weft::nn
