#include "weft/nn/linear.h"

#include "weft/kernels/activation.h"
#include "weft/kernels/gemm.h"
#include "weft/parallel/mappings.h"

namespace weft::nn {

using parallel::Mapping;

const char* sequence_parallel_name(SequenceParallel sp) {
  switch (sp) {
    case SequenceParallel::off: return "off";
    case SequenceParallel::seq: return "seq";
    case SequenceParallel::batch: return "batch";
  }
  return "?";
}

SequenceParallel parse_sequence_parallel(const std::string& s) {
  if (s == "off") return SequenceParallel::off;
  if (s == "seq") return SequenceParallel::seq;
  if (s == "batch") return SequenceParallel::batch;
  WEFT_FAIL("unknown sequence parallelism '{}': use off, seq or batch", s);
}

int sp_dim(SequenceParallel sp) { return sp == SequenceParallel::batch ? 0 : 1; }

Linear::Linear(LinearConfig cfg) : Module(cfg.name), cfg_(std::move(cfg)) {
  WEFT_CHECK(cfg_.in > 0 && cfg_.out > 0, "{}: Linear needs positive sizes, got in={} out={}",
             cfg_.name, cfg_.in, cfg_.out);
  WEFT_CHECK(cfg_.compute == DType::f32 || cfg_.compute == DType::bf16,
             "{}: compute dtype must be f32 or bf16, got {}", cfg_.name, dtype_name(cfg_.compute));
  const int t = tp_size();
  const int r = cfg_.tp ? cfg_.tp->rank() : 0;
  if (cfg_.mode == Parallel::none || t == 1) {
    WEFT_CHECK(!cfg_.gather_output || cfg_.mode == Parallel::column,
               "{}: gather_output applies to column-parallel layers", cfg_.name);
  }
  WEFT_CHECK(!(cfg_.gather_output && cfg_.sp != SequenceParallel::off),
             "{}: gather_output cannot be combined with sequence parallelism; follow the "
             "column-parallel layer with a row-parallel one instead",
             cfg_.name);
  WEFT_CHECK(cfg_.mode != Parallel::column || cfg_.out % (t * cfg_.out_groups) == 0,
             "{}: column-parallel output size {} is not divisible by tp size {}{}", cfg_.name,
             cfg_.out, t, cfg_.out_groups > 1 ? format(" x {} groups", cfg_.out_groups) : "");
  WEFT_CHECK(cfg_.mode != Parallel::row || cfg_.in % t == 0,
             "{}: row-parallel input size {} is not divisible by tp size {}", cfg_.name, cfg_.in,
             t);
  Tensor full =
      parallel::normal_init({cfg_.out, cfg_.in}, cfg_.seed, cfg_.name + ".weight", cfg_.init_std);
  const bool split = cfg_.mode != Parallel::none && t > 1;
  weight_ = sharded_parameter(cfg_.name + ".weight", full, cfg_.mode == Parallel::row ? 1 : 0,
                              split ? r : 0, split ? t : 1, cfg_.out_groups, true);
  if (cfg_.bias) {
    Tensor zeros = Tensor::zeros({cfg_.out});
    const bool split_bias = split && cfg_.mode == Parallel::column;
    bias_ = sharded_parameter(cfg_.name + ".bias", zeros, 0, split_bias ? r : 0, split_bias ? t : 1,
                              cfg_.out_groups, false);
  }
  if (split) {
    weight_.spec.replicated_over = {"dp"};
    if (cfg_.bias && cfg_.mode == Parallel::row) {
      bias_.spec.replicated_over = {"tp", "dp"};
      if (cfg_.sp != SequenceParallel::off) bias_.grad_sum_group = cfg_.tp;
    }
  } else if (cfg_.tp && t > 1) {
    // Unpartitioned inside a TP group: every rank holds the whole layer.
    // Under SP each rank feeds it different tokens, so its gradients are
    // partial sums over the group.
    for (Parameter* p : own_parameters()) {
      p->spec.replicated_over = {"tp", "dp"};
      if (cfg_.sp != SequenceParallel::off) p->grad_sum_group = cfg_.tp;
    }
  }
}

int64_t Linear::local_in() const {
  return cfg_.mode == Parallel::row ? cfg_.in / tp_size() : cfg_.in;
}
int64_t Linear::local_out() const {
  return cfg_.mode == Parallel::column ? cfg_.out / tp_size() : cfg_.out;
}

std::vector<Parameter*> Linear::own_parameters() {
  if (cfg_.bias) return {&weight_, &bias_};
  return {&weight_};
}

Tensor Linear::gemm_forward(const Tensor& x) {
  WEFT_CHECK(x.shape().last() == local_in(), "{}: input has {} features (shape {}), expected {}",
             cfg_.name, x.shape().last(), x.shape(), local_in());
  if (cfg_.compute == DType::f32) {
    weight_compute_ = weight_.value;
  } else {
    if (!weight_compute_.defined() || weight_compute_.dtype() != cfg_.compute) {
      weight_compute_ = Tensor::empty(weight_.value.shape(), cfg_.compute);
    }
    weight_compute_.copy_from(weight_.value);
  }
  Tensor xin = x.to(cfg_.compute);
  Shape ys = x.shape();
  ys[ys.rank() - 1] = local_out();
  Tensor y = Tensor::empty(ys, cfg_.compute, Device::cpu(), MemoryTag::activations);
  const bool add_bias = cfg_.bias && !(cfg_.mode == Parallel::row && tp_size() > 1);
  kernels::gemm(xin, weight_compute_, y,
                {.trans_b = true, .bias = add_bias ? &bias_.value : nullptr});
  return y;
}

Tensor Linear::gemm_backward(const Tensor& dy, const Tensor& x, bool need_dx) {
  Tensor g = dy.to(cfg_.compute);
  Tensor xin = x.to(cfg_.compute);
  // dW (out, in) += dyᵀ · x ; db += Σ dy (column/none: local bias)
  kernels::gemm(g, xin, weight_.grad, {.trans_a = true, .accumulate = true});
  if (cfg_.bias && !(cfg_.mode == Parallel::row && tp_size() > 1)) {
    kernels::bias_backward(g, bias_.grad);
  }
  if (!need_dx) return {};
  Shape xs = dy.shape();
  xs[xs.rank() - 1] = local_in();
  Tensor dx = Tensor::empty(xs, cfg_.compute, Device::cpu(), MemoryTag::activations);
  kernels::gemm(g, weight_compute_, dx);
  return dx;
}

Tensor Linear::forward(Ctx& ctx, const Tensor& x) {
  comm::ProcessGroup* g = tp_size() > 1 && cfg_.mode != Parallel::none ? group() : nullptr;
  const bool sp = cfg_.sp != SequenceParallel::off;
  const int d = sp_dim(cfg_.sp);
  Saved& s = ctx.saved<Saved>(this);
  if (cfg_.mode == Parallel::column) {
    Tensor xin = sp ? parallel::forward(Mapping::gather_from_sp, g, x, d)
                    : parallel::forward(Mapping::copy_to_tp, g, x);
    s.x = xin;
    Tensor y = gemm_forward(xin);
    return cfg_.gather_output ? parallel::forward(Mapping::gather_from_tp, g, y) : y;
  }
  if (cfg_.mode == Parallel::row) {
    Tensor xin = x;
    if (!cfg_.input_is_parallel) {
      // Own tokens, all features -> all tokens (under SP), this rank's features.
      if (sp) xin = parallel::forward(Mapping::gather_from_sp, g, xin, d);
      xin = parallel::forward(Mapping::scatter_to_tp, g, xin);
    }
    s.x = xin;
    Tensor partial = gemm_forward(xin);
    Tensor y = sp ? parallel::forward(Mapping::reduce_scatter_to_sp, g, partial, d)
                  : parallel::forward(Mapping::reduce_from_tp, g, partial);
    if (cfg_.bias && g) kernels::bias_add(y, bias_.value);
    return y;
  }
  s.x = x;
  return gemm_forward(x);
}

Tensor Linear::backward(Ctx& ctx, const Tensor& dy) {
  comm::ProcessGroup* g = tp_size() > 1 && cfg_.mode != Parallel::none ? group() : nullptr;
  const bool sp = cfg_.sp != SequenceParallel::off;
  const int d = sp_dim(cfg_.sp);
  Saved& s = ctx.saved<Saved>(this);
  WEFT_CHECK(s.x.defined(), "{}: backward without a forward in this context", cfg_.name);
  Tensor x = s.x;
  ctx.release(this);
  if (cfg_.mode == Parallel::column) {
    Tensor dy_local = cfg_.gather_output ? parallel::backward(Mapping::gather_from_tp, g, dy) : dy;
    Tensor dx = gemm_backward(dy_local, x);
    return sp ? parallel::backward(Mapping::gather_from_sp, g, dx, d)
              : parallel::backward(Mapping::copy_to_tp, g, dx);
  }
  if (cfg_.mode == Parallel::row) {
    if (cfg_.bias && g) kernels::bias_backward(dy, bias_.grad);
    Tensor dfull = sp ? parallel::backward(Mapping::reduce_scatter_to_sp, g, dy, d)
                      : parallel::backward(Mapping::reduce_from_tp, g, dy);
    Tensor dx = gemm_backward(dfull, x);
    if (!cfg_.input_is_parallel) {
      // The all-gather of features already gives every rank the full gradient
      // of every token: keep this rank's tokens (summing them would count
      // each contribution T times).
      dx = parallel::backward(Mapping::scatter_to_tp, g, dx);
      if (sp) dx = parallel::forward(Mapping::scatter_to_sp, g, dx, d);
    }
    return dx;
  }
  return gemm_backward(dy, x);
}

}  // namespace weft::nn
