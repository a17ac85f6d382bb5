// The implementations of kernels/embedding.h, one template per kernel:
// kernels/cpu/embedding.cpp and kernels/cuda/ define the Backend::cpu and
// Backend::cuda specializations. Only kernels/embedding.cpp calls them, after
// checking the arguments.
//
// Token and position embeddings (kernels/embedding.h). Token ids are validated
// by the implementations, which read them: CUDA copies the tokens back (waiting
// for the stream), so a bad id throws weft::Error naming its position and value
// exactly as on the CPU.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/dispatch.h"
#include "weft/kernels/embedding.h"

namespace weft::kernels::impl {

template <Backend B>
void embedding_forward(const ExecContext& ec, const Tensor& tokens, const Tensor& wte, Tensor& out,
                       const EmbeddingOptions& opt);
template <Backend B>
void embedding_backward(const ExecContext& ec, const Tensor& dout, const Tensor& tokens,
                        Tensor& dwte, const EmbeddingOptions& opt);
template <Backend B>
void position_embedding_forward(const ExecContext& ec, const Tensor& wpe, Tensor& out,
                                int64_t pos_offset, bool sequence_major);
template <Backend B>
void position_embedding_backward(const ExecContext& ec, const Tensor& dout, Tensor& dwpe,
                                 int64_t pos_offset, bool sequence_major);

}  // namespace weft::kernels::impl
