// The CPU implementations of kernels/embedding.h (OpenMP loops); callers go
// through kernels/embedding.h, which checks the devices and dispatches here.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/embedding.h"

namespace weft::kernels::cpu {

void embedding_forward(const ExecContext& ec, const Tensor& tokens, const Tensor& wte, Tensor& out,
                       const EmbeddingOptions& opt);
void embedding_backward(const ExecContext& ec, const Tensor& dout, const Tensor& tokens,
                        Tensor& dwte, const EmbeddingOptions& opt);
void position_embedding_forward(const ExecContext& ec, const Tensor& wpe, Tensor& out,
                                int64_t pos_offset, bool sequence_major);
void position_embedding_backward(const ExecContext& ec, const Tensor& dout, Tensor& dwpe,
                                 int64_t pos_offset, bool sequence_major);

}  // namespace weft::kernels::cpu
