#include "weft/kernels/loss.h"

#include "weft/kernels/dispatch.h"
#include "weft/kernels/impl/loss.h"
#include "weft/kernels/loss_vocab.h"

namespace weft::kernels {

namespace {

using detail::Vocab;

Vocab check_logits(const Tensor& logits, const CrossEntropyOptions& opt, const char* op) {
  WEFT_CHECK(logits.dim() == 2, "{}: logits must be (N,V), got shape {}", op, logits.shape());
  WEFT_CHECK(logits.dtype() == DType::f32 || logits.dtype() == DType::bf16,
             "{}: logits must be f32 or bf16, got {}", op, dtype_name(logits.dtype()));
  WEFT_CHECK(opt.vocab_start >= 0, "{}: vocab_start must be >= 0, got {}", op, opt.vocab_start);
  WEFT_CHECK(opt.valid_vocab >= 0, "{}: valid_vocab must be >= 0 (0 = all columns), got {}", op,
             opt.valid_vocab);
  return detail::vocab_of(logits, opt);
}

void check_row_vector(const Tensor& t, int64_t rows, const char* op, const char* name) {
  WEFT_CHECK(t.dim() == 1 && t.size(0) == rows && t.dtype() == DType::f32,
             "{}: {} must be f32 of shape [{}], got {} {}", op, name, rows, dtype_name(t.dtype()),
             t.shape());
}

void check_targets_shape(const Tensor& targets, int64_t rows, const char* op) {
  WEFT_CHECK(targets.dim() == 1 && targets.size(0) == rows && targets.dtype() == DType::i32,
             "{}: targets must be i32 of shape [{}] (one per logits row), got {} {}", op, rows,
             dtype_name(targets.dtype()), targets.shape());
}

// The mean loss of a {mean, count} loss tensor, on the host.
float mean_of(const Tensor& loss) {
  return loss.device().is_cpu() ? *loss.data<float>() : loss.to(Device::cpu()).data<float>()[0];
}

void check_loss_out(const Tensor& loss, const char* op) {
  WEFT_CHECK(loss.dtype() == DType::f32 && loss.numel() == 2,
             "{}: loss must be f32 with two elements (mean, scored rows), got {} {}", op,
             dtype_name(loss.dtype()), loss.shape());
}

}  // namespace

float cross_entropy_forward(const ExecContext& ec, const Tensor& logits, const Tensor& targets,
                            Tensor& lse, const CrossEntropyOptions& opt) {
  // The tensors checked against the context before anything is allocated there.
  detail::kernel_device(ec, "cross_entropy_forward", {&logits, &targets, &lse});
  Tensor loss = ec.empty({2}, DType::f32);
  cross_entropy_forward(ec, logits, targets, lse, loss, opt);
  return mean_of(loss);
}

void cross_entropy_forward(const ExecContext& ec, const Tensor& logits, const Tensor& targets,
                           Tensor& lse, Tensor& loss, const CrossEntropyOptions& opt) {
  constexpr const char* op = "cross_entropy_forward";
  const Vocab v = check_logits(logits, opt, op);
  WEFT_CHECK(opt.vocab_start == 0 && v.valid_vocab <= v.cols,
             "{}: needs the whole vocabulary (vocab_start 0, valid_vocab <= {} columns), got "
             "vocab_start {} valid_vocab {}; for a vocab slice combine the row-wise pieces "
             "across ranks",
             op, v.cols, opt.vocab_start, v.valid_vocab);
  WEFT_CHECK(v.valid_cols > 0, "{}: logits {} hold no vocabulary column", op, logits.shape());
  check_targets_shape(targets, v.rows, op);
  check_row_vector(lse, v.rows, op, "lse");
  check_loss_out(loss, op);
  detail::dispatch(ec, "cross_entropy_forward", {&logits, &targets, &lse, &loss}, [&]<Backend B>() {
    impl::cross_entropy_forward<B>(ec, logits, targets, lse, loss, opt);
  });
}

void cross_entropy_backward(const ExecContext& ec, const Tensor& logits, const Tensor& targets,
                            const Tensor& lse, float dloss, Tensor& dlogits,
                            const CrossEntropyOptions& opt) {
  constexpr const char* op = "cross_entropy_backward";
  const Vocab v = check_logits(logits, opt, op);
  check_targets_shape(targets, v.rows, op);
  check_row_vector(lse, v.rows, op, "lse");
  WEFT_CHECK(dlogits.shape() == logits.shape() &&
                 (dlogits.dtype() == DType::f32 || dlogits.dtype() == DType::bf16),
             "{}: dlogits must be an f32 or bf16 tensor of the logits' shape {}, got {} {}", op,
             logits.shape(), dtype_name(dlogits.dtype()), dlogits.shape());
  WEFT_CHECK(!dlogits.same_storage(logits) ||
                 (dlogits.raw() == logits.raw() && dlogits.dtype() == logits.dtype()),
             "{}: dlogits shares storage with logits but is not the same tensor; pass logits "
             "itself to compute in place, or a separate buffer",
             op);
  if (opt.counted) check_loss_out(*opt.counted, op);
  return detail::dispatch(ec, "cross_entropy_backward",
                          {&logits, &targets, &lse, &dlogits, opt.counted}, [&]<Backend B>() {
                            return impl::cross_entropy_backward<B>(ec, logits, targets, lse, dloss,
                                                                   dlogits, opt);
                          });
}

void cross_entropy_row_max(const ExecContext& ec, const Tensor& logits, Tensor& row_max,
                           const CrossEntropyOptions& opt) {
  constexpr const char* op = "cross_entropy_row_max";
  const Vocab v = check_logits(logits, opt, op);
  check_row_vector(row_max, v.rows, op, "row_max");
  return detail::dispatch(ec, "cross_entropy_row_max", {&logits, &row_max}, [&]<Backend B>() {
    return impl::cross_entropy_row_max<B>(ec, logits, row_max, opt);
  });
}

void cross_entropy_target_logit(const ExecContext& ec, const Tensor& logits, const Tensor& targets,
                                Tensor& target_logit, const CrossEntropyOptions& opt) {
  constexpr const char* op = "cross_entropy_target_logit";
  const Vocab v = check_logits(logits, opt, op);
  check_targets_shape(targets, v.rows, op);
  check_row_vector(target_logit, v.rows, op, "target_logit");
  return detail::dispatch(
      ec, "cross_entropy_target_logit", {&logits, &targets, &target_logit}, [&]<Backend B>() {
        return impl::cross_entropy_target_logit<B>(ec, logits, targets, target_logit, opt);
      });
}

void cross_entropy_sum_exp(const ExecContext& ec, const Tensor& logits, const Tensor& row_max,
                           Tensor& sum_exp, const CrossEntropyOptions& opt) {
  constexpr const char* op = "cross_entropy_sum_exp";
  const Vocab v = check_logits(logits, opt, op);
  check_row_vector(row_max, v.rows, op, "row_max");
  check_row_vector(sum_exp, v.rows, op, "sum_exp");
  return detail::dispatch(
      ec, "cross_entropy_sum_exp", {&logits, &row_max, &sum_exp}, [&]<Backend B>() {
        return impl::cross_entropy_sum_exp<B>(ec, logits, row_max, sum_exp, opt);
      });
}

float cross_entropy_combine(const ExecContext& ec, const Tensor& row_max, const Tensor& sum_exp,
                            const Tensor& target_logit, const Tensor& targets, Tensor& lse,
                            int32_t ignore_index) {
  detail::kernel_device(ec, "cross_entropy_combine",
                        {&row_max, &sum_exp, &target_logit, &targets, &lse});
  Tensor loss = ec.empty({2}, DType::f32);
  cross_entropy_combine(ec, row_max, sum_exp, target_logit, targets, lse, loss, ignore_index);
  return mean_of(loss);
}

void cross_entropy_combine(const ExecContext& ec, const Tensor& row_max, const Tensor& sum_exp,
                           const Tensor& target_logit, const Tensor& targets, Tensor& lse,
                           Tensor& loss, int32_t ignore_index) {
  constexpr const char* op = "cross_entropy_combine";
  WEFT_CHECK(row_max.dim() == 1, "{}: row_max must be (N), got {}", op, row_max.shape());
  const int64_t rows = row_max.size(0);
  check_row_vector(row_max, rows, op, "row_max");
  check_row_vector(sum_exp, rows, op, "sum_exp");
  check_row_vector(target_logit, rows, op, "target_logit");
  check_row_vector(lse, rows, op, "lse");
  check_targets_shape(targets, rows, op);
  check_loss_out(loss, op);
  detail::dispatch(ec, "cross_entropy_combine",
                   {&row_max, &sum_exp, &target_logit, &targets, &lse, &loss}, [&]<Backend B>() {
                     impl::cross_entropy_combine<B>(ec, row_max, sum_exp, target_logit, targets,
                                                    lse, loss, ignore_index);
                   });
}

int64_t count_targets(const ExecContext& ec, const Tensor& targets, int32_t ignore_index) {
  WEFT_CHECK(targets.dim() == 1 && targets.dtype() == DType::i32,
             "count_targets: targets must be i32 of shape [N], got {} {}",
             dtype_name(targets.dtype()), targets.shape());
  return detail::dispatch(ec, "count_targets", {&targets}, [&]<Backend B>() {
    return impl::count_targets<B>(ec, targets, ignore_index);
  });
}

}  // namespace weft::kernels
