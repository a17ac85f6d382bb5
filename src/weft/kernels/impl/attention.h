// The implementations of kernels/attention.h, one template per kernel:
// kernels/cpu/attention.cpp and kernels/cuda/ define the Backend::cpu and
// Backend::cuda specializations. Only kernels/attention.cpp calls them, after
// checking the arguments.
//
// Fused attention (kernels/attention.h): on the CPU oneDNN matmuls of blocks
// around an online softmax, one block per thread; on CUDA FlashAttention-2
// style kernels (online softmax over key tiles in shared memory, only the
// logsumexp saved, the backward recomputing the probabilities; the products on
// tensor cores for bf16 heads of 16, 32, 64 or 128, on CUDA cores otherwise).
#pragma once

#include <span>
#include <string>

#include "weft/core/exec_context.h"
#include "weft/kernels/attention.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels::impl {

template <Backend B>
void attention_forward(const ExecContext& ec, const Tensor& qkv, const AttentionConfig& config,
                       Tensor& out, AttentionSaved& saved, AttentionWorkspace& workspace);
template <Backend B>
void attention_backward(const ExecContext& ec, const Tensor& dout, const Tensor& qkv,
                        const AttentionSaved& saved, const AttentionConfig& config, Tensor& dqkv,
                        AttentionWorkspace& workspace);
// Generation's cache write and decode attention (kernels/attention.h); CPU
// only (kernels/cpu/attention_decode.cpp): attention.cpp dispatches them with
// dispatch_cpu_only.
template <Backend B>
void kv_cache_write(const ExecContext& ec, const Tensor& qkv, std::span<const int64_t> start,
                    const AttentionConfig& config, Tensor& k_cache, Tensor& v_cache);
template <Backend B>
void attention_decode(const ExecContext& ec, const Tensor& qkv, std::span<const int64_t> start,
                      const AttentionConfig& config, const Tensor& k_cache, const Tensor& v_cache,
                      Tensor& out, AttentionWorkspace& workspace);
// Which kernels run a call with qkv of this dtype, head width and config
// (16-byte aligned tensors): "cuDNN" (what kernels/cuda/attention_cudnn.h
// takes), "tensor cores" (bf16 with D of 16, 32, 64 or 128: wmma products) or
// "CUDA cores" (everything else); and whether cuDNN is on. CUDA only.
template <Backend B>
const char* attention_path(DType dtype, int64_t head_dim, const AttentionConfig& config);
template <Backend B>
std::string attention_cudnn_status();
template <Backend B>
Tensor attention_dropout_mask(const ExecContext& ec, const AttentionConfig& config, int64_t batch,
                              int64_t seq);

}  // namespace weft::kernels::impl
