#include "weft/kernels/attention.h"

#include "weft/core/cuda.h"
#include "weft/kernels/cpu/attention.h"
#include "weft/kernels/cuda/attention.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

void attention_forward(const ExecContext& ec, const Tensor& qkv, const AttentionConfig& config,
                       Tensor& out, AttentionSaved& saved, AttentionWorkspace& workspace) {
  return detail::dispatch(
      ec, "attention_forward", {&qkv, &out, &saved.lse, &saved.out, &workspace.buffer},
      [&] { return cpu::attention_forward(ec, qkv, config, out, saved, workspace); },
      [&] { return cuda::attention_forward(ec, qkv, config, out, saved, workspace); });
}

void attention_backward(const ExecContext& ec, const Tensor& dout, const Tensor& qkv,
                        const AttentionSaved& saved, const AttentionConfig& config, Tensor& dqkv,
                        AttentionWorkspace& workspace) {
  return detail::dispatch(
      ec, "attention_backward", {&dout, &qkv, &saved.lse, &saved.out, &dqkv, &workspace.buffer},
      [&] { return cpu::attention_backward(ec, dout, qkv, saved, config, dqkv, workspace); },
      [&] { return cuda::attention_backward(ec, dout, qkv, saved, config, dqkv, workspace); });
}

Tensor attention_dropout_mask(const ExecContext& ec, const AttentionConfig& config, int64_t batch,
                              int64_t seq) {
  return detail::dispatch(
      ec, "attention_dropout_mask", {},
      [&] { return cpu::attention_dropout_mask(ec, config, batch, seq); },
      [&] { return cuda::attention_dropout_mask(ec, config, batch, seq); });
}

const char* attention_path(Device device, DType dtype, int64_t head_dim) {
  if (device.is_cpu()) return "cpu";
#if WEFT_HAVE_CUDA
  return cuda::attention_path(dtype, head_dim);
#else
  (void)dtype;
  (void)head_dim;
  WEFT_FAIL("attention_path: {}: {}", device, weft::cuda::unavailable_reason());
#endif
}

}  // namespace weft::kernels
