#include "weft/nn/cross_entropy.h"

#include "weft/kernels/loss.h"

namespace weft::nn {

namespace {

comm::ProcessGroup* vocab_group(const CrossEntropyConfig& cfg) {
  return cfg.tp && cfg.tp->size() > 1 ? cfg.tp.get() : nullptr;
}

// The logits as (rows, local columns) and the kernel options of this rank's
// slice; checks the shapes against the targets and the vocabulary.
struct Slice {
  Tensor logits, targets;
  kernels::CrossEntropyOptions opt;
};

Slice slice_of(const Tensor& logits, const Tensor& targets, const CrossEntropyConfig& cfg,
               const char* op) {
  WEFT_CHECK(cfg.vocab > 0, "{}: the vocabulary size must be positive, got {}", op, cfg.vocab);
  WEFT_CHECK(logits.dim() >= 1 && targets.dim() == logits.dim() - 1,
             "{}: targets {} must have the leading shape of the logits {}", op, targets.shape(),
             logits.shape());
  for (int d = 0; d + 1 < logits.dim(); ++d) {
    WEFT_CHECK(targets.size(d) == logits.size(d),
               "{}: targets {} must have the leading shape of the logits {}", op, targets.shape(),
               logits.shape());
  }
  const comm::ProcessGroup* g = vocab_group(cfg);
  const int64_t cols = logits.shape().last(), ranks = g ? g->size() : 1;
  WEFT_CHECK(cols * ranks >= cfg.vocab,
             "{}: logits hold {} vocabulary columns per rank x {} ranks, fewer than the "
             "vocabulary of {}",
             op, cols, ranks, cfg.vocab);
  const int64_t rows = logits.shape().rows();
  return {logits.reshape({rows, cols}),
          targets.reshape({rows}),
          {.ignore_index = cfg.ignore_index,
           .vocab_start = g ? g->rank() * cols : 0,
           .valid_vocab = cfg.vocab,
           .targets_checked = cfg.targets_checked}};
}

}  // namespace

float vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets, Tensor& lse,
                                   const CrossEntropyConfig& cfg) {
  Tensor loss = cfg.exec.empty({2}, DType::f32);
  vocab_parallel_cross_entropy(logits, targets, lse, loss, cfg);
  return loss.device().is_cpu() ? *loss.data<float>() : loss.to(Device::cpu()).data<float>()[0];
}

void vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets, Tensor& lse,
                                  Tensor& loss, const CrossEntropyConfig& cfg) {
  Slice s = slice_of(logits, targets, cfg, "vocab_parallel_cross_entropy");
  comm::ProcessGroup* g = vocab_group(cfg);
  const int64_t rows = s.logits.size(0);
  Tensor row_max = cfg.exec.empty({rows}, DType::f32, MemoryTag::activations);
  kernels::cross_entropy_row_max(cfg.exec, s.logits, row_max, s.opt);
  if (g) g->all_reduce(row_max, comm::ReduceOp::max).wait();
  // The target logit and the sum of exponentials share one all-reduce.
  Tensor sums = cfg.exec.empty({2, rows}, DType::f32, MemoryTag::activations);
  Tensor target_logit = sums.narrow(0, 1).reshape({rows});
  Tensor sum_exp = sums.narrow(1, 1).reshape({rows});
  kernels::cross_entropy_target_logit(cfg.exec, s.logits, s.targets, target_logit, s.opt);
  kernels::cross_entropy_sum_exp(cfg.exec, s.logits, row_max, sum_exp, s.opt);
  if (g) g->all_reduce(sums).wait();
  kernels::cross_entropy_combine(cfg.exec, row_max, sum_exp, target_logit, s.targets, lse, loss,
                                 cfg.ignore_index);
}

void vocab_parallel_cross_entropy_backward(const Tensor& logits, const Tensor& targets,
                                           const Tensor& lse, float dloss, Tensor& dlogits,
                                           const CrossEntropyConfig& cfg, const Tensor* counted) {
  Slice s = slice_of(logits, targets, cfg, "vocab_parallel_cross_entropy_backward");
  s.opt.counted = counted;
  WEFT_CHECK(dlogits.shape() == logits.shape(),
             "vocab_parallel_cross_entropy_backward: dlogits {} must have the logits' shape {}",
             dlogits.shape(), logits.shape());
  Tensor d = dlogits.reshape(s.logits.shape());
  kernels::cross_entropy_backward(cfg.exec, s.logits, s.targets, lse, dloss, d, s.opt);
}

}  // namespace weft::nn
