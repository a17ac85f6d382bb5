// Softmax cross-entropy over the vocabulary, mean over the counted tokens.
//
//   loss = 1/count · Σ_{n counted} (lse[n] - logits[n, targets[n]])
//   lse[n] = log Σ_v exp(logits[n, v])
//
// A row is counted when its target is not ignore_index. Logits are f32 or
// bf16; everything is computed in f32 with the row maximum subtracted before
// exp, and the final mean is summed in f64, in row order, so the loss is
// bitwise the same for any thread count.
//
// Vocabulary tables are often padded (to a multiple of 64 or 128 columns):
// columns whose vocabulary id is >= valid_vocab never contribute to the loss
// or the gradient, and ids there are not valid targets.
//
// Vocab-parallel cross-entropy (each rank holds the columns [vocab_start,
// vocab_start + V) of the logits) is assembled from the row-wise pieces below:
//
//   row_max      = all_reduce_max(cross_entropy_row_max(logits))
//   target_logit = all_reduce_sum(cross_entropy_target_logit(logits, targets))
//   sum_exp      = all_reduce_sum(cross_entropy_sum_exp(logits, row_max))
//   loss         = cross_entropy_combine(row_max, sum_exp, target_logit, targets) -> lse
//   dlogits      = cross_entropy_backward(logits, targets, lse)   (each rank, its slice)
//
// cross_entropy_forward is that sequence for one rank holding the whole
// vocabulary.
#pragma once

#include <cstdint>

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::kernels {

// The target that marks a token as not scored (PyTorch's default).
inline constexpr int32_t kIgnoreIndex = -100;

struct CrossEntropyOptions {
  // Rows whose target equals this are not counted (PyTorch's default).
  int32_t ignore_index = kIgnoreIndex;
  // Vocabulary id of the first logits column (the rank's slice under vocab
  // parallelism).
  int64_t vocab_start = 0;
  // Vocabulary ids >= valid_vocab are padding. 0 means vocab_start + V: every
  // column is real and the vocabulary ends with these logits. A vocab-parallel
  // caller must give the global vocabulary size, or targets held by later
  // ranks are rejected as out of range.
  int64_t valid_vocab = 0;
  // The targets were checked by the caller (ids in [0, valid_vocab) or
  // ignore_index, e.g. on the host before they were copied to the device):
  // on a GPU no kernel reads them back to check them. Out-of-range ids are
  // then never read out of bounds, but give an undefined loss.
  bool targets_checked = false;
  // cross_entropy_backward: the loss tensor of the forward (see below) whose
  // count of scored rows scales the gradient, read on the device; null: the
  // rows are counted here (on a GPU, a read of the targets to the host).
  const Tensor* counted = nullptr;
};

// logits (N,V) f32|bf16, targets (N) i32 -> lse (N) f32; returns the mean loss
// over the counted rows (0 when every row is ignored). Needs the whole
// vocabulary (vocab_start 0). Targets outside [0, valid_vocab) other than
// ignore_index throw weft::Error naming the row and the value.
float cross_entropy_forward(const ExecContext& ec, const Tensor& logits, const Tensor& targets,
                            Tensor& lse, const CrossEntropyOptions& opt = {});
// The same, the result left on the device: loss (f32, two elements, on ec's
// device) = {the mean loss, the number of scored rows} (the count exact up to
// 2^24 rows). Nothing returns to the host when opt.targets_checked.
void cross_entropy_forward(const ExecContext& ec, const Tensor& logits, const Tensor& targets,
                           Tensor& lse, Tensor& loss, const CrossEntropyOptions& opt = {});

// logits (N,V), targets (N), lse (N) -> dlogits (N,V) f32|bf16
//   = (exp(logits - lse) - onehot(targets - vocab_start)) · dloss / count
// Rows of ignored targets and padding columns get exactly 0; count is the
// number of counted rows, and when it is 0 the whole gradient is 0. lse is
// the global one (from cross_entropy_forward or cross_entropy_combine).
// dlogits may be logits itself (same dtype), which saves an (N,V) buffer.
void cross_entropy_backward(const ExecContext& ec, const Tensor& logits, const Tensor& targets,
                            const Tensor& lse, float dloss, Tensor& dlogits,
                            const CrossEntropyOptions& opt = {});

// logits (N,V) -> row_max (N) f32 = max over the valid columns of the slice
// (-inf when the slice holds only padding, the identity of a max all-reduce).
void cross_entropy_row_max(const ExecContext& ec, const Tensor& logits, Tensor& row_max,
                           const CrossEntropyOptions& opt = {});

// logits (N,V), targets (N) -> target_logit (N) f32 = logits[n, targets[n] - vocab_start]
// when the target falls in this slice, else 0 (ignored rows, other ranks' ids),
// so that summing over the ranks gives the target logit.
void cross_entropy_target_logit(const ExecContext& ec, const Tensor& logits, const Tensor& targets,
                                Tensor& target_logit, const CrossEntropyOptions& opt = {});

// logits (N,V), row_max (N) -> sum_exp (N) f32 = Σ_valid exp(logits - row_max)
// row_max is the global maximum, so that the per-rank sums add up.
void cross_entropy_sum_exp(const ExecContext& ec, const Tensor& logits, const Tensor& row_max,
                           Tensor& sum_exp, const CrossEntropyOptions& opt = {});

// row_max (N), sum_exp (N), target_logit (N), targets (N) -> lse (N) = row_max + log(sum_exp);
// returns the mean of lse - target_logit over the counted rows (0 if none).
float cross_entropy_combine(const ExecContext& ec, const Tensor& row_max, const Tensor& sum_exp,
                            const Tensor& target_logit, const Tensor& targets, Tensor& lse,
                            int32_t ignore_index = kIgnoreIndex);
// The same into loss (f32, two elements) = {mean, scored rows}, as the
// device form of cross_entropy_forward; nothing returns to the host.
void cross_entropy_combine(const ExecContext& ec, const Tensor& row_max, const Tensor& sum_exp,
                           const Tensor& target_logit, const Tensor& targets, Tensor& lse,
                           Tensor& loss, int32_t ignore_index = kIgnoreIndex);

// targets (N) -> how many are not ignore_index.
int64_t count_targets(const ExecContext& ec, const Tensor& targets,
                      int32_t ignore_index = kIgnoreIndex);

}  // namespace weft::kernels
