// The CUDA implementations of kernels/attention.h (fused FlashAttention-2
// style kernels on CUDA cores: online softmax over key tiles in shared memory,
// only the logsumexp saved, backward recomputing the probabilities from it);
// callers go through kernels/attention.h, which checks the devices and
// dispatches here.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/attention.h"

namespace weft::kernels::cuda {

void attention_forward(const ExecContext& ec, const Tensor& qkv, const AttentionConfig& config,
                       Tensor& out, AttentionSaved& saved, AttentionWorkspace& workspace);
void attention_backward(const ExecContext& ec, const Tensor& dout, const Tensor& qkv,
                        const AttentionSaved& saved, const AttentionConfig& config, Tensor& dqkv,
                        AttentionWorkspace& workspace);
Tensor attention_dropout_mask(const ExecContext& ec, const AttentionConfig& config, int64_t batch,
                              int64_t seq);

}  // namespace weft::kernels::cuda
