#include "weft/nn/linear.h"

#include "weft/core/cuda.h"
#include "weft/kernels/activation.h"
#include "weft/kernels/gemm.h"
#include "weft/nn/weight_sources.h"
#include "weft/parallel/overlap/bulk.h"

namespace weft::nn {

using parallel::Mapping;
using parallel::Schedule;
using Op = parallel::GemmQuantizer::Operand;

LinearConfig residual_projection(bool partitioned, std::string name, int64_t in, int64_t out,
                                 float init_std, int64_t layers, std::string overlap_name,
                                 bool bias, int64_t groups) {
  return {.name = std::move(name),
          .in = in,
          .out = out,
          .mode = partitioned ? Parallel::row : Parallel::none,
          .bias = bias,
          .gather_output = false,
          .input_is_parallel = true,
          .init_std = init_std / std::sqrt(2.0f * static_cast<float>(layers)),
          .groups = groups,
          .overlap_name = std::move(overlap_name)};
}

Linear::Linear(ContextPtr context, LinearConfig cfg)
    : Module(cfg.name), pc_(std::move(context)), cfg_(std::move(cfg)) {
  init(true);
}

Linear::Linear(ContextPtr context, LinearConfig cfg, std::shared_ptr<parallel::WeightSource> source)
    : Module(cfg.name), pc_(std::move(context)), cfg_(std::move(cfg)), source_(std::move(source)) {
  WEFT_CHECK(source_ != nullptr, "{}: Linear over a null weight source", cfg_.name);
  init(false);
}

void Linear::init(bool own_weight) {
  WEFT_CHECK(pc_ != nullptr, "{}: Linear needs a parallel context", cfg_.name);
  WEFT_CHECK(cfg_.in > 0 && cfg_.out > 0, "{}: Linear needs positive sizes, got in={} out={}",
             cfg_.name, cfg_.in, cfg_.out);
  const int t = tp_size();
  const int r = pc_->tp_rank();
  if (cfg_.mode == Parallel::none || t == 1) {
    WEFT_CHECK(!cfg_.gather_output || cfg_.mode == Parallel::column,
               "{}: gather_output applies to column-parallel layers", cfg_.name);
  }
  WEFT_CHECK(!(cfg_.gather_output && pc_->sequence_parallel()),
             "{}: gather_output cannot be combined with sequence parallelism; follow the "
             "column-parallel layer with a row-parallel one instead",
             cfg_.name);
  const int positions = shares_rows() ? cfg_.positions : t;
  WEFT_CHECK(cfg_.mode != Parallel::column || cfg_.out % (positions * cfg_.groups) == 0,
             "{}: column-parallel output size {} is not divisible by {} {}{}", cfg_.name, cfg_.out,
             shares_rows() ? "its positions" : "tp size", positions,
             cfg_.groups > 1 ? format(" x {} groups", cfg_.groups) : "");
  WEFT_CHECK(cfg_.mode != Parallel::row || cfg_.in % (t * cfg_.groups) == 0,
             "{}: row-parallel input size {} is not divisible by tp size {}{}", cfg_.name, cfg_.in,
             t, cfg_.groups > 1 ? format(" x {} groups", cfg_.groups) : "");
  const bool split = cfg_.mode != Parallel::none && t > 1;
  const bool sp = pc_->sequence_parallel();
  if (own_weight) {
    Tensor full =
        parallel::normal_init({cfg_.out, cfg_.in}, pc_->seed, cfg_.name + ".weight", cfg_.init_std);
    weight_ = shares_rows()
                  ? shared_parameter(cfg_.name + ".weight", full, true)
                  : sharded_parameter(cfg_.name + ".weight", full,
                                      cfg_.mode == Parallel::row ? 1 : 0, split ? r : 0,
                                      split ? t : 1, cfg_.groups, true, pc_->exec.device());
  }
  if (cfg_.bias) {
    Tensor zeros = Tensor::zeros({cfg_.out});
    const bool split_bias = split && cfg_.mode == Parallel::column;
    bias_ = shares_rows()
                ? shared_parameter(cfg_.name + ".bias", zeros, false)
                : sharded_parameter(
                      cfg_.name + ".bias", zeros, 0, split_bias ? r : 0, split_bias ? t : 1,
                      cfg_.mode == Parallel::column ? cfg_.groups : 1, false, pc_->exec.device());
  }
  std::vector<Parameter*> mine;
  if (own_weight) mine.push_back(&weight_);
  if (cfg_.bias) mine.push_back(&bias_);
  if (split) {
    if (cfg_.bias && cfg_.mode == Parallel::row) {
      bias_.spec.replicated_over = parallel::replicated_groups(true);
      if (sp) bias_.grad_sum_group = pc_->tp;
    }
  } else if (t > 1) {
    // Unpartitioned inside a TP group: every rank holds the whole layer.
    // Under SP each rank feeds it different tokens, so its gradients are
    // partial sums over the group.
    for (Parameter* p : mine) {
      p->spec.replicated_over = parallel::replicated_groups(true);
      if (sp) p->grad_sum_group = pc_->tp;
    }
  }
  if (own_weight) source_ = make_weight_source(pc_, weight_);
  if (own_weight && pc_->precision.quantized()) {
    quantizer_ = std::make_unique<parallel::GemmQuantizer>(*pc_, cfg_.name, group());
  }
  WEFT_CHECK(source_->shape() == (Shape{local_out(), local_in()}),
             "{}: the weight source holds a {} weight, the layer needs ({}, {})", cfg_.name,
             source_->shape(), local_out(), local_in());
  owns_source_ = own_weight;
}

bool Linear::shares_rows() const {
  return cfg_.mode == Parallel::column && cfg_.positions > 0 && cfg_.positions < tp_size();
}

Parameter Linear::shared_parameter(const std::string& name, const Tensor& full, bool decay) const {
  WEFT_CHECK(cfg_.share_group && cfg_.share_group->size() == tp_size() / cfg_.positions,
             "{}: output rows at {} positions over {} TP ranks need the group of the {} ranks "
             "that share each slice",
             cfg_.name, cfg_.positions, tp_size(), tp_size() / std::max(cfg_.positions, 1));
  WEFT_CHECK(!pc_->gtp_runtime,
             "{}: output rows shared by several TP ranks cannot be sharded over the gtp group as "
             "well",
             cfg_.name);
  const ShardSpec spec =
      parallel::shared_split_spec(full.shape(), "tp", pc_->tp_rank(), tp_size(), cfg_.positions,
                                  cfg_.groups, cfg_.dealt_groups);
  WEFT_CHECK(spec.shared_rank == cfg_.share_group->rank(),
             "{}: TP rank {} is shared rank {} of its output rows, but rank {} of the share group",
             cfg_.name, pc_->tp_rank(), spec.shared_rank, cfg_.share_group->rank());
  Parameter p = make_parameter(name, shard_of(spec, full), spec, decay, pc_->exec.device());
  p.share_group = cfg_.share_group;
  return p;
}

parallel::OverlapChoice Linear::overlap(const char* pass) const {
  if (cfg_.overlap_name.empty()) return {};
  return pc_->overlap.choice(gemm_name(pass));
}

comm::ProcessGroup* Linear::group() const {
  return cfg_.mode == Parallel::none ? nullptr : pc_->tp_group();
}

int64_t Linear::local_in() const {
  return cfg_.mode == Parallel::row ? cfg_.in / tp_size() : cfg_.in;
}
int64_t Linear::local_out() const {
  if (shares_rows()) {
    // Its dealt groups and the common ones, each out / groups / positions rows.
    const int64_t held =
        cfg_.dealt_groups / (tp_size() / cfg_.positions) + (cfg_.groups - cfg_.dealt_groups);
    return held * (cfg_.out / cfg_.groups / cfg_.positions);
  }
  return cfg_.mode == Parallel::column ? cfg_.out / tp_size() : cfg_.out;
}

std::vector<Parameter*> Linear::own_parameters() {
  std::vector<Parameter*> out;
  if (owns_source_) out.push_back(&source_->parameter());
  if (cfg_.bias) out.push_back(&bias_);
  return out;
}

namespace {

Shape with_last(Shape s, int64_t last) {
  s[s.rank() - 1] = last;
  return s;
}

// Whether a schedule runs as this rank's plain GEMM (scheduled_gemm runs
// every schedule over a trivial group as plain).
bool plain_gemm(parallel::Schedule s, const comm::ProcessGroup* g) {
  return s == Schedule::plain || g == nullptr || g->size() == 1;
}

}  // namespace

bool Linear::epilogues() const { return !pc_->exec.device().is_cpu() && !quantizer_; }

Tensor Linear::forward(Ctx& ctx, const Tensor& x) { return forward_impl(ctx, x, nullptr); }

void Linear::release_saved_input(Ctx& ctx) { ctx.saved<Saved>(this).x = Tensor(); }

void Linear::resave_input(Ctx& ctx, const Tensor& x) {
  WEFT_CHECK(cfg_.mode != Parallel::row || cfg_.input_is_parallel,
             "{}: a row-parallel layer that scatters its input cannot have it saved again",
             cfg_.name);
  ctx.saved<Saved>(this).x =
      quantizer_ ? x
                 : parallel::gemm_input(pc_->exec, pc_->precision.gemm_input(), x, ws().input_cast);
}

Linear::Activated Linear::forward_gelu(Ctx& ctx, const Tensor& x) {
  Activated out;
  out.pre = forward_impl(ctx, x, &out.act);
  if (!out.act.defined()) {
    out.act = pc_->exec.empty(out.pre.shape(), out.pre.dtype(), MemoryTag::activations);
    kernels::gelu_forward(pc_->exec, out.pre, out.act);
  }
  return out;
}

Tensor Linear::forward_impl(Ctx& ctx, const Tensor& x, Tensor* act) {
  const cuda::NvtxRange nvtx(name() + " forward");
  const int64_t expected =
      cfg_.mode == Parallel::row && !cfg_.input_is_parallel ? cfg_.in : local_in();
  WEFT_CHECK(x.dim() >= 1 && x.shape().last() == expected,
             "{}: input has {} features (shape {}), expected {}", cfg_.name, x.shape().last(),
             x.shape(), expected);
  const ExecContext& ec = pc_->exec;
  comm::ProcessGroup* g = group();
  const bool sp = pc_->sequence_parallel();
  // Quantized recipes: the source hands out the quantized weight, as the
  // native GEMM reads it or as its dequantized operand.
  const QuantizedTensor* qw =
      native_quantized(false) ? source_->native_quantized_weight(*quantizer_, false, ctx) : nullptr;
  Tensor w;
  if (qw == nullptr) {
    w = quantizer_ ? source_->quantized_weight(*quantizer_, false, ctx)
                   : source_->weight_for_forward(ctx);
  }
  Tensor xin = x;
  if (cfg_.mode == Parallel::row && !cfg_.input_is_parallel) {
    // Own tokens, all features -> all tokens (under SP), this rank's features.
    xin = parallel::forward(pc_->exec, sp ? Mapping::sp_to_tp : Mapping::scatter_to_tp, g, x);
  }
  // Quantized recipes quantize the activation as it is (f32 or bf16).
  if (!quantizer_)
    xin = parallel::gemm_input(ec, pc_->precision.gemm_input(), xin, ws().input_cast);
  ctx.saved<Saved>(this).x = xin;
  parallel::QuantizedOperands q;
  if (qw != nullptr) {
    q = {.a = {&quantizer_->native(Op::input, xin, false, ctx), false},
         .b = {qw, false},
         .fast_accumulation = true};
  } else if (quantizer_) {
    xin = quantizer_->operand(Op::input, xin, false, ctx);
  }
  const DType out_dtype = pc_->compute();
  const std::string fprop = gemm_name("fprop");
  parallel::GemmCall call{.options = {.trans_b = true, .bias = bias_ptr()},
                          .overlap = overlap("fprop"),
                          .name = fprop.c_str(),
                          .quantized = qw != nullptr ? &q : nullptr};
  call.group = g;
  Shape ys = with_last(xin.shape(), local_out());
  switch (cfg_.mode) {
    case Parallel::column:
      call.schedule = sp ? Schedule::all_gather_gemm : Schedule::plain;
      ys = parallel::gathered_shape(ys, sp ? g : nullptr);
      break;
    case Parallel::row:
      call.schedule = sp ? Schedule::gemm_reduce_scatter : Schedule::gemm_all_reduce;
      ys = sp ? parallel::scattered_shape(ys, g) : ys;
      break;
    case Parallel::none: call.schedule = Schedule::plain; break;
  }
  Tensor y = ec.empty(ys, out_dtype, MemoryTag::activations);
  if (act && epilogues() && out_dtype == DType::bf16 && !cfg_.gather_output &&
      plain_gemm(call.schedule, g)) {
    // GELU in the GEMM's epilogue: y is the pre-activation (aux), the
    // activation the output.
    Tensor a = ec.empty(ys, out_dtype, MemoryTag::activations);
    kernels::GemmOptions fused = call.options;
    fused.epilogue = kernels::GemmEpilogue::gelu_aux;
    fused.aux = &y;
    if (kernels::gemm_epilogue_fused(ec, xin, w, a, fused)) {
      call.options = fused;
      parallel::scheduled_gemm(ec, call, xin, w, a, ws().gemm);
      *act = a;
      return y;
    }
  }
  parallel::scheduled_gemm(ec, call, xin, w, y, ws().gemm);
  if (cfg_.gather_output) y = parallel::forward(pc_->exec, Mapping::gather_from_tp, g, y);
  return y;
}

Tensor Linear::backward(Ctx& ctx, const Tensor& dy) { return backward_impl(ctx, dy, {}); }

Tensor Linear::backward_without_bias_grad(Ctx& ctx, const Tensor& dy) {
  return backward_impl(ctx, dy, {.bias_grad = false});
}

Linear::GeluGrad Linear::backward_gelu(Ctx& ctx, const Tensor& dy, const Tensor& pre,
                                       Tensor* pre_bias_grad) {
  GeluGrad out;
  bool fused = false;
  Tensor dx = backward_impl(
      ctx, dy, {.gelu_pre = &pre, .gelu_bias_grad = pre_bias_grad, .gelu_fused = &fused});
  if (fused) {
    out.dpre = dx;
    out.bias_grad_done = pre_bias_grad != nullptr;
    return out;
  }
  out.dpre = pc_->exec.empty(pre.shape(), pre.dtype(), MemoryTag::activations);
  kernels::gelu_backward(pc_->exec, dx, pre, out.dpre);
  return out;
}

kernels::GemmOptions Linear::dgrad_options(const Grads& d, bool plain, const Tensor& w,
                                           const Tensor& dx, Tensor& aux) const {
  if (d.gelu_pre == nullptr || !plain || !epilogues() || d.q_w != nullptr ||
      dx.dtype() != DType::bf16 || !(d.gelu_pre->shape() == dx.shape()) ||
      d.gelu_pre->dtype() != dx.dtype()) {
    return {};
  }
  aux = *d.gelu_pre;  // only read (DGELU's input)
  const kernels::GemmOptions opt{
      .epilogue = kernels::GemmEpilogue::dgelu_bgrad, .aux = &aux, .bias_grad = d.gelu_bias_grad};
  if (!kernels::gemm_epilogue_fused(pc_->exec, d.dy, w, dx, opt)) return {};
  return opt;
}

Tensor Linear::backward_impl(Ctx& ctx, const Tensor& dy_in, Grads extras) {
  const cuda::NvtxRange nvtx(name() + " backward");
  Saved& s = ctx.saved<Saved>(this);
  WEFT_CHECK(s.x.defined(), "{}: backward without a forward in this context", cfg_.name);
  const Tensor x = s.x;
  ctx.release(this);
  const ExecContext& ec = pc_->exec;
  comm::ProcessGroup* g = group();
  const parallel::overlap::BulkBackward bulk = parallel::overlap::bulk_backward(
      pc_->overlap.enabled() && !cfg_.overlap_name.empty(), overlap("dgrad"), overlap("wgrad"));
  // Column under SP: the input shard's re-gather goes first, so that it is
  // in flight while the dgrad GEMM runs.
  const bool regather = cfg_.mode == Parallel::column && pc_->sequence_parallel() && g;
  parallel::Pending xs =
      regather ? parallel::all_gather_rows(ec, g, x, ws().gemm.gathered) : parallel::Pending{x, {}};
  if (!bulk.wgrad) xs = {xs.get(ec), {}};
  const QuantizedTensor* qw =
      native_quantized(true) ? source_->native_quantized_weight(*quantizer_, true, ctx) : nullptr;
  Tensor w;
  if (qw == nullptr) {
    w = quantizer_ ? source_->quantized_weight(*quantizer_, true, ctx)
                   : source_->weight_for_backward(ctx);
  }
  Tensor dy =
      cfg_.gather_output ? parallel::backward(pc_->exec, Mapping::gather_from_tp, g, dy_in) : dy_in;
  if (!quantizer_) dy = parallel::gemm_input(ec, pc_->precision.gemm_input(), dy, ws().grad_cast);
  // Quantized recipes: the dgrad GEMM's operands, and the wgrad GEMM's made
  // from the high-precision tensors.
  Grads d = extras;
  d.dy = dy;
  d.dy_hp = dy;
  if (qw != nullptr) {
    d.q_dy = &quantizer_->native(Op::grad_output, dy, false, ctx);
    d.q_w = qw;
  } else if (quantizer_) {
    d.dy = quantizer_->operand(Op::grad_output, dy, false, ctx);
  }
  if (cfg_.mode == Parallel::row) return backward_row(ctx, x, d, w);
  return backward_column(ctx, xs, d, w, bulk, regather);
}

Tensor Linear::backward_row(Ctx& ctx, const Tensor& x, const Grads& d, const Tensor& w) {
  const ExecContext& ec = pc_->exec;
  comm::ProcessGroup* g = group();
  const bool sp = pc_->sequence_parallel();
  // dx = gather(dy) · W, and the wgrad GEMM reads the same gathered dy.
  const Schedule schedule = sp ? Schedule::all_gather_gemm : Schedule::plain;
  Tensor dx =
      ec.empty(with_last(parallel::gathered_shape(d.dy.shape(), sp ? g : nullptr), local_in()),
               x.dtype(), MemoryTag::activations);
  const std::string dgrad_name = gemm_name("dgrad");
  const parallel::QuantizedOperands q{.a = {d.q_dy, false}, .b = {d.q_w, true}};
  const bool native = d.q_w != nullptr;
  // Fused with the GELU backward (backward_gelu) where dx is the dgrad
  // GEMM's own output.
  Tensor aux;
  const kernels::GemmOptions dgrad =
      dgrad_options(d, plain_gemm(schedule, g) && cfg_.input_is_parallel, w, dx, aux);
  if (dgrad.epilogue != kernels::GemmEpilogue::none) *d.gelu_fused = true;
  const parallel::ScheduledGemm run = parallel::scheduled_gemm(ec,
                                                               {.schedule = schedule,
                                                                .group = g,
                                                                .options = dgrad,
                                                                .overlap = overlap("dgrad"),
                                                                .name = dgrad_name.c_str(),
                                                                .quantized = native ? &q : nullptr},
                                                               d.dy, w, dx, ws().gemm);
  Tensor dy_full = run.gathered.defined() ? run.gathered : d.dy;
  if (quantizer_) {
    // The wgrad operands are quantized column-wise from the high-precision
    // dy (the gathered dy above holds the row-wise quantized values).
    dy_full = d.dy_hp;
    if (run.gathered.defined()) {
      dy_full = ec.empty(run.gathered.shape(), d.dy_hp.dtype(), MemoryTag::activations);
      g->all_gather(dy_full, d.dy_hp).wait(ec);
    }
  }
  // The bias was added after the reduction: its gradient is this rank's
  // rows of dy (partial over the group under SP: grad_sum_group), which the
  // wgrad GEMM sums where it reads them (no gather, no quantized recipe).
  const bool bias_grad = cfg_.bias && d.bias_grad;
  const bool in_gemm = bias_grad && !quantizer_ && !run.gathered.defined();
  if (ctx.defer_weight_grads() && !quantizer_) {
    defer_wgrad(ctx, dy_full, x, run.gathered.defined() ? d.dy_hp : Tensor(), bias_grad, in_gemm);
  } else {
    Tensor wgrad = source_->weight_grad(ctx);
    if (!wgrad_gemm(ec, ctx, dy_full, x, native, wgrad, in_gemm ? &bias_.grad : nullptr) &&
        bias_grad) {
      kernels::bias_backward(ec, d.dy_hp, bias_.grad);
    }
    source_->finalize_weight_grad(ctx, wgrad);
  }
  if (!cfg_.input_is_parallel) {
    // The dual of the input mapping: this rank's tokens, all features.
    dx = parallel::backward(pc_->exec, sp ? Mapping::sp_to_tp : Mapping::scatter_to_tp, g, dx);
  }
  return dx;
}

Tensor Linear::backward_column(Ctx& ctx, const parallel::Pending& xs, const Grads& d,
                               const Tensor& w, const parallel::overlap::BulkBackward& bulk,
                               bool regather) {
  const ExecContext& ec = pc_->exec;
  comm::ProcessGroup* g = group();
  // Column (and unpartitioned): the dgrad collective stays in flight during
  // the wgrad GEMM; the re-gathered input is waited for only then.
  Schedule schedule = Schedule::plain;
  if (cfg_.mode == Parallel::column) {
    schedule = pc_->sequence_parallel() ? Schedule::gemm_reduce_scatter : Schedule::gemm_all_reduce;
  }
  Shape dxs = with_last(d.dy.shape(), local_in());
  if (schedule == Schedule::gemm_reduce_scatter) dxs = parallel::scattered_shape(dxs, g);
  Tensor dx = ec.empty(dxs, d.dy_hp.dtype(), MemoryTag::activations);
  const std::string dgrad_name = gemm_name("dgrad");
  const bool native = d.q_w != nullptr;
  const parallel::QuantizedOperands q{.a = {d.q_dy, false}, .b = {d.q_w, true}};
  Tensor aux;
  const kernels::GemmOptions dgrad = dgrad_options(d, plain_gemm(schedule, g), w, dx, aux);
  if (dgrad.epilogue != kernels::GemmEpilogue::none) *d.gelu_fused = true;
  const parallel::overlap::DgradBesideWgrad call{.schedule = schedule,
                                                 .group = g,
                                                 .bulk = bulk,
                                                 .dgrad_overlap = overlap("dgrad"),
                                                 .regather = regather,
                                                 .comm_cores = pc_->overlap.comm_cores(),
                                                 .name = dgrad_name.c_str(),
                                                 .quantized = native ? &q : nullptr,
                                                 .options = dgrad};
  parallel::overlap::dgrad_beside_wgrad(
      ec, call, d.dy, w, dx, ws().gemm, [&](const ExecContext& gemm_context) {
        if (ctx.defer_weight_grads() && !quantizer_) {
          const bool bias_grad = cfg_.bias && d.bias_grad;
          defer_wgrad(ctx, d.dy, xs.get(ec), Tensor(), bias_grad, bias_grad);
          return;
        }
        Tensor wgrad = source_->weight_grad(ctx);
        const Tensor x_full = xs.get(ec);
        // The bias gradient in the wgrad GEMM where that runs on ec's stream
        // (no quantized recipe: d.dy is d.dy_hp).
        const bool bias_grad = cfg_.bias && d.bias_grad;
        const bool in_gemm = bias_grad && !quantizer_ && gemm_context.stream() == ec.stream();
        if (!wgrad_gemm(gemm_context, ctx, quantizer_ ? d.dy_hp : d.dy, x_full, native, wgrad,
                        in_gemm ? &bias_.grad : nullptr) &&
            bias_grad) {
          kernels::bias_backward(ec, d.dy_hp, bias_.grad);
        }
        source_->finalize_weight_grad(ctx, wgrad);
      });
  return dx;
}

void Linear::defer_wgrad(Ctx& ctx, const Tensor& dy, const Tensor& x, const Tensor& bias_dy,
                         bool bias_grad, bool bias_in_gemm) {
  // Copies: dy and x may live in workspaces the next GEMMs reuse.
  const Tensor dyc = dy.clone(MemoryTag::activations);
  const Tensor xc = x.clone(MemoryTag::activations);
  const Tensor bias_dyc = bias_dy.defined() ? bias_dy.clone(MemoryTag::activations) : dyc;
  ctx.defer_weight_grad([this, &ctx, dyc, xc, bias_dyc, bias_grad, bias_in_gemm] {
    const ExecContext& ec = pc_->exec;
    Tensor wgrad = source_->weight_grad(ctx);
    if (!wgrad_gemm(ec, ctx, dyc, xc, false, wgrad, bias_in_gemm ? &bias_.grad : nullptr) &&
        bias_grad) {
      kernels::bias_backward(ec, bias_dyc, bias_.grad);
    }
    source_->finalize_weight_grad(ctx, wgrad);
  });
}

bool Linear::native_quantized(bool backward) const {
  if (!quantizer_ || !quantizer_->native_gemm()) return false;
  // Ring and pipeline overlap split the GEMM around its collective; bulk
  // overlap leaves it whole (and takes quantized operands).
  const parallel::OverlapMethod m = overlap(backward ? "dgrad" : "fprop").method;
  if (m == parallel::OverlapMethod::ring || m == parallel::OverlapMethod::pipeline) return false;
  const bool gathers = pc_->sequence_parallel() && group() != nullptr &&
                       (backward ? cfg_.mode == Parallel::row : cfg_.mode == Parallel::column);
  return !gathers;
}

bool Linear::wgrad_gemm(const ExecContext& gemm_context, Ctx& ctx, const Tensor& dy,
                        const Tensor& x, bool native, Tensor& wgrad, Tensor* bias_grad) {
  // The step's first micro-batch writes its own weight's gradient (no
  // zeroing pass before it; the result is the same: 0 + p is p).
  const bool accumulate = !(owns_source_ && ctx.first_microbatch() && write_grad(wgrad));
  if (native) {
    // dWᵀ's TN form: the column-wise copies of dy and x, quantized from the
    // high-precision tensors.
    const QuantizedTensor& qdy = quantizer_->native(Op::grad_output, dy, true, ctx);
    const QuantizedTensor& qx = quantizer_->native(Op::input, x, true, ctx);
    kernels::quantized_gemm(gemm_context, {&qdy, true}, {&qx, true}, wgrad,
                            {.accumulate = accumulate});
    return false;
  }
  Tensor dy_w = dy, x_w = x;
  if (quantizer_) {
    dy_w = quantizer_->operand(Op::grad_output, dy, true, ctx);
    x_w = quantizer_->operand(Op::input, x, true, ctx);
  }
  if (bias_grad && epilogues()) {
    const kernels::GemmOptions opt{.trans_a = true,
                                   .accumulate = accumulate,
                                   .epilogue = kernels::GemmEpilogue::bgrad_a,
                                   .bias_grad = bias_grad};
    if (kernels::gemm_epilogue_fused(gemm_context, dy_w, x_w, wgrad, opt)) {
      kernels::gemm(gemm_context, dy_w, x_w, wgrad, opt);
      return true;
    }
  }
  kernels::gemm(gemm_context, dy_w, x_w, wgrad, {.trans_a = true, .accumulate = accumulate});
  return false;
}

bool Linear::write_grad(const Tensor& wgrad) {
  Parameter& w = weight();
  // Only the parameter's own gradient (a GTP source's buffer is its own
  // business); the bias gradient stays accumulated.
  if (!wgrad.same_storage(w.grad) || wgrad.raw() != w.grad.raw() ||
      wgrad.numel() != w.grad.numel()) {
    return false;
  }
  w.grad_overwritten = true;
  return true;
}

}  // namespace weft::nn
