#include "weft/kernels/attention.h"

#include "weft/kernels/cpu/attention.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

void attention_forward(const ExecContext& ec, const Tensor& qkv, const AttentionConfig& config,
                       Tensor& out, AttentionSaved& saved, AttentionWorkspace& workspace) {
  return detail::dispatch(
      ec, "attention_forward",
      {&qkv, &out, &saved.probs, &saved.mask, &saved.weights, &workspace.buffer},
      [&] { return cpu::attention_forward(ec, qkv, config, out, saved, workspace); });
}

void attention_backward(const ExecContext& ec, const Tensor& dout, const Tensor& qkv,
                        const AttentionSaved& saved, const AttentionConfig& config, Tensor& dqkv,
                        AttentionWorkspace& workspace) {
  return detail::dispatch(
      ec, "attention_backward",
      {&dout, &qkv, &saved.probs, &saved.mask, &saved.weights, &dqkv, &workspace.buffer},
      [&] { return cpu::attention_backward(ec, dout, qkv, saved, config, dqkv, workspace); });
}

}  // namespace weft::kernels
