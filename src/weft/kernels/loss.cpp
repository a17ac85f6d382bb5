#include "weft/kernels/loss.h"

#include "weft/kernels/cpu/loss.h"
#include "weft/kernels/cuda/loss.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

float cross_entropy_forward(const ExecContext& ec, const Tensor& logits, const Tensor& targets,
                            Tensor& lse, const CrossEntropyOptions& opt) {
  return detail::dispatch(
      ec, "cross_entropy_forward", {&logits, &targets, &lse},
      [&] { return cpu::cross_entropy_forward(ec, logits, targets, lse, opt); },
      [&] { return cuda::cross_entropy_forward(ec, logits, targets, lse, opt); });
}

void cross_entropy_backward(const ExecContext& ec, const Tensor& logits, const Tensor& targets,
                            const Tensor& lse, float dloss, Tensor& dlogits,
                            const CrossEntropyOptions& opt) {
  return detail::dispatch(
      ec, "cross_entropy_backward", {&logits, &targets, &lse, &dlogits},
      [&] { return cpu::cross_entropy_backward(ec, logits, targets, lse, dloss, dlogits, opt); },
      [&] { return cuda::cross_entropy_backward(ec, logits, targets, lse, dloss, dlogits, opt); });
}

void cross_entropy_row_max(const ExecContext& ec, const Tensor& logits, Tensor& row_max,
                           const CrossEntropyOptions& opt) {
  return detail::dispatch(
      ec, "cross_entropy_row_max", {&logits, &row_max},
      [&] { return cpu::cross_entropy_row_max(ec, logits, row_max, opt); },
      [&] { return cuda::cross_entropy_row_max(ec, logits, row_max, opt); });
}

void cross_entropy_target_logit(const ExecContext& ec, const Tensor& logits, const Tensor& targets,
                                Tensor& target_logit, const CrossEntropyOptions& opt) {
  return detail::dispatch(
      ec, "cross_entropy_target_logit", {&logits, &targets, &target_logit},
      [&] { return cpu::cross_entropy_target_logit(ec, logits, targets, target_logit, opt); },
      [&] { return cuda::cross_entropy_target_logit(ec, logits, targets, target_logit, opt); });
}

void cross_entropy_sum_exp(const ExecContext& ec, const Tensor& logits, const Tensor& row_max,
                           Tensor& sum_exp, const CrossEntropyOptions& opt) {
  return detail::dispatch(
      ec, "cross_entropy_sum_exp", {&logits, &row_max, &sum_exp},
      [&] { return cpu::cross_entropy_sum_exp(ec, logits, row_max, sum_exp, opt); },
      [&] { return cuda::cross_entropy_sum_exp(ec, logits, row_max, sum_exp, opt); });
}

float cross_entropy_combine(const ExecContext& ec, const Tensor& row_max, const Tensor& sum_exp,
                            const Tensor& target_logit, const Tensor& targets, Tensor& lse,
                            int32_t ignore_index) {
  return detail::dispatch(
      ec, "cross_entropy_combine", {&row_max, &sum_exp, &target_logit, &targets, &lse},
      [&] {
        return cpu::cross_entropy_combine(ec, row_max, sum_exp, target_logit, targets, lse,
                                          ignore_index);
      },
      [&] {
        return cuda::cross_entropy_combine(ec, row_max, sum_exp, target_logit, targets, lse,
                                           ignore_index);
      });
}

int64_t count_targets(const ExecContext& ec, const Tensor& targets, int32_t ignore_index) {
  return detail::dispatch(
      ec, "count_targets", {&targets},
      [&] { return cpu::count_targets(ec, targets, ignore_index); },
      [&] { return cuda::count_targets(ec, targets, ignore_index); });
}

}  // namespace weft::kernels
