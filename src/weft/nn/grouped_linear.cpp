#include "weft/nn/grouped_linear.h"

#include <numeric>

#include "weft/core/cuda.h"
#include "weft/kernels/gemm.h"
#include "weft/nn/weight_sources.h"

namespace weft::nn {

using Op = parallel::GemmQuantizer::Operand;

GroupedLinearConfig GroupedLinear::checked(GroupedLinearConfig cfg, int tp, int ep) {
  WEFT_CHECK(cfg.experts >= 1 && cfg.in > 0 && cfg.out > 0,
             "{}: GroupedLinear needs positive sizes, got {} experts, in={} out={}", cfg.name,
             cfg.experts, cfg.in, cfg.out);
  WEFT_CHECK(cfg.mode != Parallel::column || cfg.out % (tp * cfg.groups) == 0,
             "{}: column-parallel output size {} is not divisible by tp size {} x {} groups",
             cfg.name, cfg.out, tp, cfg.groups);
  WEFT_CHECK(cfg.mode != Parallel::row || cfg.in % (tp * cfg.groups) == 0,
             "{}: row-parallel input size {} is not divisible by tp size {} x {} groups", cfg.name,
             cfg.in, tp, cfg.groups);
  WEFT_CHECK(cfg.experts % ep == 0,
             "{}: {} experts do not split over an expert-parallel group of {}: choose --ep to "
             "divide --moe-experts",
             cfg.name, cfg.experts, ep);
  return cfg;
}

std::string GroupedLinear::expert_name(int64_t global_expert) const {
  return format("{}.experts.{}", cfg_.name, global_expert);
}

std::string GroupedLinear::weight_name(int64_t global_expert) const {
  return expert_name(global_expert) + ".weight";
}

GroupedLinear::GroupedLinear(ContextPtr context, GroupedLinearConfig cfg)
    : Module(cfg.name),
      pc_(std::move(context)),
      cfg_(checked(std::move(cfg), pc_->tp_size(), pc_->ep_size())) {
  const int t = pc_->tp_size();
  const bool split = cfg_.mode != Parallel::none && t > 1;
  weights_.reserve(static_cast<size_t>(local_experts()));
  for (int64_t e = first_expert(); e < first_expert() + local_experts(); ++e) {
    const std::string name = weight_name(e);
    Tensor full = parallel::normal_init({cfg_.out, cfg_.in}, pc_->seed, name, cfg_.init_std);
    Parameter p = sharded_parameter(name, full, cfg_.mode == Parallel::row ? 1 : 0,
                                    split ? pc_->tp_rank() : 0, split ? t : 1, cfg_.groups, true,
                                    pc_->exec.device());
    // An unpartitioned layer inside a TP group: every rank holds it whole.
    if (!split && t > 1) {
      p.spec.replicated_over = parallel::replicated_groups(true);
      // Under SP each rank feeds it different tokens: partial gradients.
      if (pc_->sequence_parallel()) p.grad_sum_group = pc_->tp;
    }
    if (pc_->ep_size() > 1) std::erase(p.spec.replicated_over, std::string("ep"));
    weights_.push_back(std::move(p));
    sources_.push_back(make_weight_source(pc_, weights_.back()));
    if (pc_->precision.quantized()) {
      quantizers_.push_back(std::make_unique<parallel::GemmQuantizer>(
          *pc_, expert_name(e), split ? pc_->tp_group() : nullptr));
      quantizer_ptrs_.push_back(quantizers_.back().get());
    }
  }
  batch_ = make_weight_batch(pc_, sources_);
}

int64_t GroupedLinear::local_in() const {
  return cfg_.mode == Parallel::row ? cfg_.in / pc_->tp_size() : cfg_.in;
}
int64_t GroupedLinear::local_out() const {
  return cfg_.mode == Parallel::column ? cfg_.out / pc_->tp_size() : cfg_.out;
}

std::vector<Parameter*> GroupedLinear::own_parameters() {
  std::vector<Parameter*> out;
  for (const auto& s : sources_) out.push_back(&s->parameter());
  return out;
}

std::vector<std::string> GroupedLinear::own_parameters_elsewhere() {
  std::vector<std::string> out;
  for (int64_t e = 0; e < cfg_.experts; ++e) {
    if (e < first_expert() || e >= first_expert() + local_experts()) out.push_back(weight_name(e));
  }
  return out;
}

const kernels::PackedWeight* GroupedLinear::packed(size_t e, bool backward, Ctx& ctx) const {
  if (!quantizers_.empty() || pc_->precision.gemm_input() != DType::bf16) return nullptr;
  return sources_[e]->packed_weight(backward, ctx);
}

Tensor GroupedLinear::forward(Ctx&, const Tensor&) {
  WEFT_FAIL("{}: GroupedLinear::forward needs the rows per expert: forward(ctx, x, counts)",
            cfg_.name);
}

Tensor GroupedLinear::forward(Ctx& ctx, const Tensor& x, std::span<const int64_t> counts) {
  const cuda::NvtxRange nvtx(name() + " forward");
  WEFT_CHECK(static_cast<int64_t>(counts.size()) == local_experts(),
             "{}: {} counts for {} local experts", cfg_.name, counts.size(), local_experts());
  const int64_t m = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  WEFT_CHECK(x.dim() == 2 && x.size(0) == m && x.size(1) == local_in(),
             "{}: input {} does not hold the {} rows × {} features the counts say", cfg_.name,
             x.shape(), m, local_in());
  const ExecContext& ec = pc_->exec;
  Saved& s = ctx.saved<Saved>(this);
  s.x = x.to(pc_->compute());
  s.counts.assign(counts.begin(), counts.end());
  Tensor y = ec.empty({m, local_out()}, pc_->compute(), MemoryTag::activations);
  std::vector<Tensor> batched;
  if (batch_) {
    batched = quantizers_.empty() ? batch_->weights_for_forward(ctx)
                                  : batch_->quantized_weights(quantizer_ptrs_, false, ctx);
  }
  int64_t start = 0;
  for (size_t e = 0; e < sources_.size(); ++e) {
    parallel::GemmQuantizer* q = quantizers_.empty() ? nullptr : quantizers_[e].get();
    if (const kernels::PackedWeight* w = packed(e, false, ctx)) {
      const int64_t n = counts[e];
      Tensor ye = y.rows(start, n);
      kernels::gemm(ec, s.x.rows(start, n), *w, ye, {.trans_b = true});
      start += n;
      continue;
    }
    const Tensor w = batch_ ? batched[e]
                     : q    ? sources_[e]->quantized_weight(*q, false, ctx)
                            : sources_[e]->weight_for_forward(ctx);
    const int64_t n = counts[e];
    if (n == 0) continue;
    Tensor xe = s.x.rows(start, n);
    if (q) xe = q->operand(Op::input, xe, false, ctx);
    Tensor ye = y.rows(start, n);
    kernels::gemm(ec, xe, w, ye, {.trans_b = true});
    start += n;
  }
  return y;
}

Tensor GroupedLinear::backward(Ctx& ctx, const Tensor& dy_in) {
  const cuda::NvtxRange nvtx(name() + " backward");
  Saved& s = ctx.saved<Saved>(this);
  WEFT_CHECK(s.x.defined(), "{}: backward without a forward in this context", cfg_.name);
  const Saved saved = s;
  ctx.release(this);
  const ExecContext& ec = pc_->exec;
  const Tensor dy = dy_in.to(pc_->compute());
  WEFT_CHECK(dy.dim() == 2 && dy.size(0) == saved.x.size(0) && dy.size(1) == local_out(),
             "{}: output gradient {} does not match the forward's ({}, {})", cfg_.name, dy.shape(),
             saved.x.size(0), local_out());
  Tensor dx = ec.empty(saved.x.shape(), pc_->compute(), MemoryTag::activations);
  // Expert parallelism: these rows are ep_size() ranks' tokens (see the header).
  const float wgrad_scale = 1.0f / static_cast<float>(pc_->ep_size());
  std::vector<Tensor> batched, batched_grads;
  if (batch_) {
    batched = quantizers_.empty() ? batch_->weights_for_backward(ctx)
                                  : batch_->quantized_weights(quantizer_ptrs_, true, ctx);
    batched_grads = batch_->weight_grads(ctx);
  }
  int64_t start = 0;
  for (size_t e = 0; e < sources_.size(); ++e) {
    parallel::WeightSource& src = *sources_[e];
    parallel::GemmQuantizer* q = quantizers_.empty() ? nullptr : quantizers_[e].get();
    const kernels::PackedWeight* packed_w = packed(e, true, ctx);
    const Tensor w = packed_w ? Tensor()
                     : batch_ ? batched[e]
                     : q      ? src.quantized_weight(*q, true, ctx)
                              : src.weight_for_backward(ctx);
    Tensor wgrad = batch_ ? batched_grads[e] : src.weight_grad(ctx);
    const int64_t n = saved.counts[e];
    if (n > 0) {
      const Tensor dye = dy.rows(start, n), xe = saved.x.rows(start, n);
      Tensor dxe = dx.rows(start, n);
      if (packed_w) {
        kernels::gemm(ec, dye, *packed_w, dxe);
      } else {
        kernels::gemm(ec, q ? q->operand(Op::grad_output, dye, false, ctx) : dye, w, dxe);
      }
      kernels::gemm(ec, q ? q->operand(Op::grad_output, dye, true, ctx) : dye,
                    q ? q->operand(Op::input, xe, true, ctx) : xe, wgrad,
                    {.trans_a = true, .accumulate = true, .alpha = wgrad_scale});
      start += n;
    }
    if (!batch_) src.finalize_weight_grad(ctx, wgrad);
  }
  if (batch_) batch_->finalize_weight_grads(ctx);
  return dx;
}

}  // namespace weft::nn
