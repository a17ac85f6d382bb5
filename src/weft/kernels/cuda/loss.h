// The CUDA implementations of kernels/loss.h; callers go through
// kernels/loss.h, which checks the devices and dispatches here.
//
// Targets are validated on the host (they are N int32, copied over): an
// invalid one throws weft::Error naming its row before any kernel runs, so
// every function taking targets waits for the stream's earlier work. The
// mean losses are summed on the host in f64, in row order, from the per-row
// lse and target logits, as the CPU does; row_max and sum_exp alone run
// without waiting.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/loss.h"

namespace weft::kernels::cuda {

float cross_entropy_forward(const ExecContext& ec, const Tensor& logits, const Tensor& targets,
                            Tensor& lse, const CrossEntropyOptions& opt);
void cross_entropy_backward(const ExecContext& ec, const Tensor& logits, const Tensor& targets,
                            const Tensor& lse, float dloss, Tensor& dlogits,
                            const CrossEntropyOptions& opt);
void cross_entropy_row_max(const ExecContext& ec, const Tensor& logits, Tensor& row_max,
                           const CrossEntropyOptions& opt);
void cross_entropy_target_logit(const ExecContext& ec, const Tensor& logits, const Tensor& targets,
                                Tensor& target_logit, const CrossEntropyOptions& opt);
void cross_entropy_sum_exp(const ExecContext& ec, const Tensor& logits, const Tensor& row_max,
                           Tensor& sum_exp, const CrossEntropyOptions& opt);
float cross_entropy_combine(const ExecContext& ec, const Tensor& row_max, const Tensor& sum_exp,
                            const Tensor& target_logit, const Tensor& targets, Tensor& lse,
                            int32_t ignore_index);
int64_t count_targets(const ExecContext& ec, const Tensor& targets, int32_t ignore_index);

}  // namespace weft::kernels::cuda
