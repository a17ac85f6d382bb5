#include "weft/kernels/embedding.h"

#include "weft/kernels/cpu/embedding.h"
#include "weft/kernels/cuda/embedding.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

void embedding_forward(const ExecContext& ec, const Tensor& tokens, const Tensor& wte, Tensor& out,
                       const EmbeddingOptions& opt) {
  return detail::dispatch(
      ec, "embedding_forward", {&tokens, &wte, &out},
      [&] { return cpu::embedding_forward(ec, tokens, wte, out, opt); },
      [&] { return cuda::embedding_forward(ec, tokens, wte, out, opt); });
}

void embedding_backward(const ExecContext& ec, const Tensor& dout, const Tensor& tokens,
                        Tensor& dwte, const EmbeddingOptions& opt) {
  return detail::dispatch(
      ec, "embedding_backward", {&dout, &tokens, &dwte},
      [&] { return cpu::embedding_backward(ec, dout, tokens, dwte, opt); },
      [&] { return cuda::embedding_backward(ec, dout, tokens, dwte, opt); });
}

void position_embedding_forward(const ExecContext& ec, const Tensor& wpe, Tensor& out,
                                int64_t pos_offset, bool sequence_major) {
  return detail::dispatch(
      ec, "position_embedding_forward", {&wpe, &out},
      [&] { return cpu::position_embedding_forward(ec, wpe, out, pos_offset, sequence_major); },
      [&] { return cuda::position_embedding_forward(ec, wpe, out, pos_offset, sequence_major); });
}

void position_embedding_backward(const ExecContext& ec, const Tensor& dout, Tensor& dwpe,
                                 int64_t pos_offset, bool sequence_major) {
  return detail::dispatch(
      ec, "position_embedding_backward", {&dout, &dwpe},
      [&] { return cpu::position_embedding_backward(ec, dout, dwpe, pos_offset, sequence_major); },
      [&] {
        return cuda::position_embedding_backward(ec, dout, dwpe, pos_offset, sequence_major);
      });
}

}  // namespace weft::kernels
