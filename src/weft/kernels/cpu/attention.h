// The CPU implementations of kernels/attention.h (strided oneDNN matmuls around an OpenMP softmax);
// callers go through kernels/attention.h, which checks the devices and dispatches here.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/attention.h"

namespace weft::kernels::cpu {

void attention_forward(const ExecContext& ec, const Tensor& qkv, const AttentionConfig& config,
                       Tensor& out, AttentionSaved& saved, AttentionWorkspace& workspace);
void attention_backward(const ExecContext& ec, const Tensor& dout, const Tensor& qkv,
                        const AttentionSaved& saved, const AttentionConfig& config, Tensor& dqkv,
                        AttentionWorkspace& workspace);

}  // namespace weft::kernels::cpu
