// The CUDA implementations of kernels/attention.h (fused FlashAttention-2
// style kernels: online softmax over key tiles in shared memory, only the
// logsumexp saved, backward recomputing the probabilities from it; the
// products on tensor cores for bf16 heads of 16, 32, 64 or 128, on CUDA cores
// otherwise);
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
// Which kernels run a call with qkv of this dtype and head width (16-byte
// aligned tensors): "tensor cores" (bf16 with D of 16, 32, 64 or 128: wmma
// products) or "CUDA cores" (everything else). For tests and reports.
const char* attention_path(DType dtype, int64_t head_dim);
Tensor attention_dropout_mask(const ExecContext& ec, const AttentionConfig& config, int64_t batch,
                              int64_t seq);

}  // namespace weft::kernels::cuda
