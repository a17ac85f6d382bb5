#include "weft/kernels/embedding.h"

#include "weft/kernels/cpu/embedding.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

void embedding_forward(const ExecContext& ec, const Tensor& tokens, const Tensor& wte, Tensor& out,
                       const EmbeddingOptions& opt) {
  const Device device = detail::kernel_device(ec, "embedding_forward", {&tokens, &wte, &out});
  if (device.is_cpu()) return cpu::embedding_forward(ec, tokens, wte, out, opt);
  detail::no_kernel("embedding_forward", device);
}

void embedding_backward(const ExecContext& ec, const Tensor& dout, const Tensor& tokens,
                        Tensor& dwte, const EmbeddingOptions& opt) {
  const Device device = detail::kernel_device(ec, "embedding_backward", {&dout, &tokens, &dwte});
  if (device.is_cpu()) return cpu::embedding_backward(ec, dout, tokens, dwte, opt);
  detail::no_kernel("embedding_backward", device);
}

void position_embedding_forward(const ExecContext& ec, const Tensor& wpe, Tensor& out,
                                int64_t pos_offset, bool sequence_major) {
  const Device device = detail::kernel_device(ec, "position_embedding_forward", {&wpe, &out});
  if (device.is_cpu())
    return cpu::position_embedding_forward(ec, wpe, out, pos_offset, sequence_major);
  detail::no_kernel("position_embedding_forward", device);
}

void position_embedding_backward(const ExecContext& ec, const Tensor& dout, Tensor& dwpe,
                                 int64_t pos_offset, bool sequence_major) {
  const Device device = detail::kernel_device(ec, "position_embedding_backward", {&dout, &dwpe});
  if (device.is_cpu())
    return cpu::position_embedding_backward(ec, dout, dwpe, pos_offset, sequence_major);
  detail::no_kernel("position_embedding_backward", device);
}

}  // namespace weft::kernels
