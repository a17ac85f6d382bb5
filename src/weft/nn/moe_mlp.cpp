#include "weft/nn/moe_mlp.h"

#include "weft/core/cuda.h"
#include "weft/kernels/activation.h"
#include "weft/nn/moe_dispatch.h"
#include "weft/nn/moe_exchange.h"

namespace weft::nn {

using parallel::Mapping;

MoeMLPConfig MoeMLP::checked(MoeMLPConfig cfg, const ParallelContext& pc) {
  WEFT_CHECK(cfg.width > 0, "{}: MoeMLP needs a positive width, got {}", cfg.name, cfg.width);
  if (cfg.hidden == 0) cfg.hidden = 4 * cfg.width;
  WEFT_CHECK(cfg.layers >= 1, "{}: layers (for the fc2 init scale) must be >= 1, got {}", cfg.name,
             cfg.layers);
  (void)pc;
  return cfg;
}

MoeMLP::MoeMLP(ContextPtr context, MoeMLPConfig cfg)
    : Module(cfg.name),
      pc_(std::move(context)),
      cfg_(checked(std::move(cfg), *pc_)),
      norm_(cfg_.norm, pc_, {.name = cfg_.norm_name, .width = cfg_.width, .eps = cfg_.eps}),
      router_(pc_, {.name = cfg_.name + ".router",
                    .width = cfg_.width,
                    .routing = {.experts = cfg_.experts,
                                .top_k = cfg_.top_k,
                                .capacity_factor = cfg_.capacity_factor},
                    .aux_coef = cfg_.aux_coef,
                    .z_coef = cfg_.z_coef,
                    .init_std = cfg_.init_std}),
      fc1_(pc_, {.name = cfg_.name + ".fc1",
                 .experts = cfg_.experts,
                 .in = cfg_.width,
                 .out = gated() ? 2 * cfg_.hidden : cfg_.hidden,
                 .mode = cfg_.partition == Partition::tensor ? Parallel::column : Parallel::none,
                 .init_std = cfg_.init_std,
                 .groups = gated() ? 2 : 1}),
      fc2_(pc_, {.name = cfg_.name + ".fc2",
                 .experts = cfg_.experts,
                 .in = cfg_.hidden,
                 .out = cfg_.width,
                 .mode = cfg_.partition == Partition::tensor ? Parallel::row : Parallel::none,
                 .init_std = cfg_.init_std / std::sqrt(2.0f * static_cast<float>(cfg_.layers))}) {
  // Partitioned experts: the router sees every token of the TP group on
  // every rank (under SP too, after the gather), so its gradient is whole on
  // each, not a partial sum. Replicated experts under SP route this rank's
  // rows only: the router's and the experts' gradients are partial sums.
  if (group()) router_.linear().weight().grad_sum_group = nullptr;
}

parallel::Mapping MoeMLP::entry() const {
  return pc_->sequence_parallel() ? Mapping::gather_from_sp : Mapping::copy_to_tp;
}

parallel::Mapping MoeMLP::exit() const {
  return pc_->sequence_parallel() ? Mapping::reduce_scatter_to_sp : Mapping::reduce_from_tp;
}

comm::ProcessGroup* MoeMLP::expert_group() const {
  return pc_->ep_size() > 1 ? pc_->ep.get() : nullptr;
}

comm::ProcessGroup* MoeMLP::group() const {
  return cfg_.partition == Partition::tensor ? pc_->tp_group() : nullptr;
}

Tensor MoeMLP::forward(Ctx& ctx, const Tensor& x) {
  const cuda::NvtxRange nvtx(name() + " forward");
  const ExecContext& ec = pc_->exec;
  Saved& s = ctx.saved<Saved>(this);
  s.shape = x.shape();
  Tensor n = norm_.forward(ctx, x);
  n = n.reshape({n.numel() / cfg_.width, cfg_.width});
  // Under SP: every token of the TP group, gathered (the backward
  // reduce-scatters); without it the identity (the backward all-reduces).
  n = parallel::forward(ec, entry(), group(), n);
  router_.forward(ctx, n);
  const Routing& r = router_.routing(ctx);
  Tensor xp = dispatch_tokens(ec, n, r);
  comm::ProcessGroup* ep = expert_group();
  std::span<const int64_t> counts = r.counts;
  if (ep) {
    s.plan = plan_exchange(ec, *ep, r.counts);
    xp = exchange_forward(ec, *ep, s.plan, xp);
    counts = s.plan.local_counts;
  }
  s.h = fc1_.forward(ctx, xp, counts);
  Tensor a = ec.empty({s.h.size(0), fc2_.local_in()}, s.h.dtype(), MemoryTag::activations);
  if (gated()) {
    kernels::swiglu_forward(ec, s.h, a);
  } else {
    kernels::gelu_forward(ec, s.h, a);
  }
  s.o = fc2_.forward(ctx, a, counts);
  if (ep) s.o = exchange_back(ec, *ep, s.plan, s.o);
  Tensor y = combine_tokens(ec, s.o, r, pc_->compute());
  return parallel::forward(ec, exit(), group(), y).reshape(s.shape);
}

Tensor MoeMLP::backward(Ctx& ctx, const Tensor& dy_in) {
  const cuda::NvtxRange nvtx(name() + " backward");
  Saved& s = ctx.saved<Saved>(this);
  WEFT_CHECK(s.h.defined(), "{}: backward without a forward in this context", cfg_.name);
  const Saved saved = s;
  ctx.release(this);
  const ExecContext& ec = pc_->exec;
  comm::ProcessGroup* g = group();
  const Routing& r = router_.routing(ctx);
  Tensor dy = dy_in.reshape({dy_in.numel() / cfg_.width, cfg_.width});
  dy = parallel::backward(ec, exit(), group(), dy);
  CombineGrads dc = combine_backward(ec, dy, saved.o, r);
  Tensor dgate = Tensor::from({r.tokens, r.top_k}, dc.dgate).to(ec.device());
  // Each rank's dot products are with its partial sums of o.
  if (g) dgate = parallel::all_reduce_sum(ec, *g, dgate);
  comm::ProcessGroup* ep = expert_group();
  if (ep) dc.dexperts = exchange_forward(ec, *ep, saved.plan, dc.dexperts);
  Tensor da = fc2_.backward(ctx, dc.dexperts);
  Tensor dh = ec.empty(saved.h.shape(), saved.h.dtype(), MemoryTag::activations);
  if (gated()) {
    kernels::swiglu_backward(ec, da, saved.h, dh);
  } else {
    kernels::gelu_backward(ec, da, saved.h, dh);
  }
  Tensor dxp = fc1_.backward(ctx, dh);
  if (ep) dxp = exchange_back(ec, *ep, saved.plan, dxp);
  Tensor dn = dispatch_backward(ec, dxp, r);
  dn = parallel::backward(ec, entry(), group(), dn);
  // The router's gradient is whole on every rank: it joins after the
  // reduction (under SP, this rank's rows of it).
  Tensor dn_router = router_.backward(ctx, dgate);
  if (pc_->sequence_parallel() && g) {
    dn_router = parallel::forward(ec, Mapping::scatter_to_sp, g, dn_router);
  }
  Tensor sum = ec.empty(dn.shape(), dn.dtype(), MemoryTag::activations);
  kernels::add(ec, dn, dn_router.to(dn.dtype()), sum);
  return norm_.backward(ctx, sum.reshape(saved.shape));
}

}  // namespace weft::nn
