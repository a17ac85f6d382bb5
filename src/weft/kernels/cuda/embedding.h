// The CUDA implementations of kernels/embedding.h; callers go through
// kernels/embedding.h, which checks the devices and dispatches here.
//
// Token ids are validated on the host: both kernels copy the tokens back
// (waiting for the stream), so a bad id throws weft::Error naming its position
// and value exactly as on the CPU, before any kernel reads the table.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"
#include "weft/kernels/embedding.h"

namespace weft::kernels::cuda {

void embedding_forward(const ExecContext& ec, const Tensor& tokens, const Tensor& wte, Tensor& out,
                       const EmbeddingOptions& opt);
void embedding_backward(const ExecContext& ec, const Tensor& dout, const Tensor& tokens,
                        Tensor& dwte, const EmbeddingOptions& opt);
void position_embedding_forward(const ExecContext& ec, const Tensor& wpe, Tensor& out,
                                int64_t pos_offset, bool sequence_major);
void position_embedding_backward(const ExecContext& ec, const Tensor& dout, Tensor& dwpe,
                                 int64_t pos_offset, bool sequence_major);

}  // namespace weft::kernels::cuda
