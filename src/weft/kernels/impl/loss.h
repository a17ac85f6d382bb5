// The implementations of kernels/loss.h, one template per kernel:
// kernels/cpu/loss.cpp and kernels/cuda/ define the Backend::cpu and
// Backend::cuda specializations. Only kernels/loss.cpp calls them, after
// checking the arguments.
//
// Cross-entropy (kernels/loss.h). Targets are validated by the implementations,
// which read them: on CUDA every function taking targets copies them over and
// waits for the stream. The mean losses are summed in f64 in row order on both
// backends.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/dispatch.h"
#include "weft/kernels/loss.h"

namespace weft::kernels::impl {

// loss: f32 {2} on the device = {mean, scored rows}.
template <Backend B>
void cross_entropy_forward(const ExecContext& ec, const Tensor& logits, const Tensor& targets,
                           Tensor& lse, Tensor& loss, const CrossEntropyOptions& opt);
template <Backend B>
void cross_entropy_backward(const ExecContext& ec, const Tensor& logits, const Tensor& targets,
                            const Tensor& lse, float dloss, Tensor& dlogits,
                            const CrossEntropyOptions& opt);
template <Backend B>
void cross_entropy_row_max(const ExecContext& ec, const Tensor& logits, Tensor& row_max,
                           const CrossEntropyOptions& opt);
template <Backend B>
void cross_entropy_target_logit(const ExecContext& ec, const Tensor& logits, const Tensor& targets,
                                Tensor& target_logit, const CrossEntropyOptions& opt);
template <Backend B>
void cross_entropy_sum_exp(const ExecContext& ec, const Tensor& logits, const Tensor& row_max,
                           Tensor& sum_exp, const CrossEntropyOptions& opt);
template <Backend B>
void cross_entropy_combine(const ExecContext& ec, const Tensor& row_max, const Tensor& sum_exp,
                           const Tensor& target_logit, const Tensor& targets, Tensor& lse,
                           Tensor& loss, int32_t ignore_index);
template <Backend B>
int64_t count_targets(const ExecContext& ec, const Tensor& targets, int32_t ignore_index);

}  // namespace weft::kernels::impl
