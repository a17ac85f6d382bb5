#include "weft/kernels/attention.h"

#include "weft/kernels/cpu/attention.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

void attention_forward(const ExecContext& ec, const Tensor& qkv, const AttentionConfig& config,
                       Tensor& out, AttentionSaved& saved, AttentionWorkspace& workspace) {
  const Device device = detail::kernel_device(
      ec, "attention_forward",
      {&qkv, &out, &saved.probs, &saved.mask, &saved.weights, &workspace.buffer});
  if (device.is_cpu()) return cpu::attention_forward(ec, qkv, config, out, saved, workspace);
  detail::no_kernel("attention_forward", device);
}

void attention_backward(const ExecContext& ec, const Tensor& dout, const Tensor& qkv,
                        const AttentionSaved& saved, const AttentionConfig& config, Tensor& dqkv,
                        AttentionWorkspace& workspace) {
  const Device device = detail::kernel_device(
      ec, "attention_backward",
      {&dout, &qkv, &saved.probs, &saved.mask, &saved.weights, &dqkv, &workspace.buffer});
  if (device.is_cpu())
    return cpu::attention_backward(ec, dout, qkv, saved, config, dqkv, workspace);
  detail::no_kernel("attention_backward", device);
}

}  // namespace weft::kernels
