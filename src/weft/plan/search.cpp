#include "weft/plan/search.h"

#include <algorithm>
#include <cmath>

#include "weft/core/error.h"

namespace weft::plan {

namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    low.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

// The sizes a dimension may take: its divisors of `left` when the search
// varies it, else 1.
std::vector<int64_t> sizes(bool varied, int64_t left) {
  if (!varied) return {1};
  return divisors(left);
}

}  // namespace

std::string layout_problem(const Workload& w, const Layout& l, int world, int64_t global_batch) {
  const nn::GptConfig& m = w.model;
  if (l.tp < 1 || l.cp < 1 || l.ep < 1 || l.gtp < 1 || l.pp < 1 || l.dp < 1 || l.vpp < 1 ||
      l.micro_batch < 1 || l.grad_accum < 1) {
    return "every size must be at least 1";
  }
  if (l.world() != world) {
    return format("--tp {} x --cp {} x --ep {} x --gtp {} x --pp {} x --dp {} is {} ranks, not {}",
                  l.tp, l.cp, l.ep, l.gtp, l.pp, l.dp, l.world(), world);
  }
  try {
    nn::validate(m, l.tp);
  } catch (const Error& e) {
    return format("--tp {}: {}", l.tp, e.what());
  }
  if (l.ep > 1 && m.moe_experts == 0) return format("--ep {} needs a MoE model", l.ep);
  if (m.moe_experts > 0 && m.moe_experts % l.ep != 0) {
    return format("--ep {} does not divide the {} experts", l.ep, m.moe_experts);
  }
  if (l.gtp > 1 && l.tp > m.kv_head_count()) {
    return format("--gtp {} with {} KV heads replicated over --tp {}", l.gtp, m.kv_head_count(),
                  l.tp);
  }
  if (l.gtp > 1 && w.gpu) return format("--gtp {} has no GPU path", l.gtp);
  if (l.tp == 1 && l.sp != parallel::SequenceParallel::off) return "--sp needs --tp above 1";
  if (l.sp == parallel::SequenceParallel::seq && (m.seq / l.cp) % l.tp != 0) {
    return format("--sp seq: the sequence of {} does not split over --tp {}", m.seq / l.cp, l.tp);
  }
  if (l.sp == parallel::SequenceParallel::batch && l.micro_batch % l.tp != 0) {
    return format("--sp batch: --micro-batch {} is not a multiple of --tp {}", l.micro_batch, l.tp);
  }
  if (l.cp > 1 && m.seq % (2 * l.cp) != 0) {
    return format("--cp {}: --seq {} is not divisible by {}", l.cp, m.seq, 2 * l.cp);
  }
  if (l.pp > m.layers) return format("--pp {} is above the {} layers", l.pp, m.layers);
  if (l.vpp > 1) {
    if (l.pp == 1 || l.schedule != PipelineSchedule::interleaved) {
      return "--vpp needs --pp above 1 and --pp-schedule interleaved";
    }
    if (m.layers % (l.pp * l.vpp) != 0 && (m.layers + 2) % (l.pp * l.vpp) != 0) {
      return format(
          "--pp {} x --vpp {} divides neither the {} layers nor the layers with the embedding and "
          "head counted as one each",
          l.pp, l.vpp, m.layers);
    }
    if (l.grad_accum % l.pp != 0) {
      return format("interleaved: --grad-accum {} is not a multiple of --pp {}", l.grad_accum,
                    l.pp);
    }
  }
  if (l.distributed_optimizer && l.dp * l.cp == 1)
    return "--distributed-optimizer needs dp above 1";
  if (l.recompute_layers > 0 && l.recompute != Recompute::full) {
    return "--recompute-layers needs --recompute full";
  }
  if (l.global_batch() != global_batch) {
    return format("--micro-batch {} x {} data ranks x --grad-accum {} is {} sequences, not {}",
                  l.micro_batch, l.data_ranks(), l.grad_accum, l.global_batch(), global_batch);
  }
  return {};
}

std::vector<Layout> enumerate_layouts(const Workload& w, int world, int64_t global_batch) {
  std::vector<Dimension> on;
  for (const PlannableDimension& p : kPlannableDimensions)
    if (p.enabled) on.push_back(p.dimension);
  return enumerate_layouts(w, world, global_batch, on);
}

std::vector<Layout> enumerate_layouts(const Workload& w, int world, int64_t global_batch,
                                      const std::vector<Dimension>& varied) {
  auto plannable = [&](Dimension d) {
    return std::find(varied.begin(), varied.end(), d) != varied.end();
  };
  auto sizes = [&](Dimension d, int64_t left) { return weft::plan::sizes(plannable(d), left); };
  std::vector<Layout> out;
  using SP = parallel::SequenceParallel;
  for (int64_t tp : sizes(Dimension::tp, world)) {
    for (int64_t cp : sizes(Dimension::cp, world / tp)) {
      for (int64_t ep : sizes(Dimension::ep, world / tp / cp)) {
        for (int64_t gtp : sizes(Dimension::gtp, world / tp / cp / ep)) {
          for (int64_t pp : sizes(Dimension::pp, world / tp / cp / ep / gtp)) {
            const int64_t dp = world / tp / cp / ep / gtp / pp;
            if (!plannable(Dimension::dp) && dp != 1) continue;
            const int64_t data = ep * gtp * dp;
            if (global_batch % data != 0) continue;
            const int64_t per_rank = global_batch / data;
            std::vector<int64_t> micro = plannable(Dimension::micro_batch)
                                             ? divisors(per_rank)
                                             : std::vector<int64_t>{per_rank};
            std::vector<SP> sps{SP::off};
            if (tp > 1 && plannable(Dimension::sp)) sps = {SP::off, SP::seq, SP::batch};
            std::vector<int64_t> vpps{1};
            if (pp > 1 && plannable(Dimension::vpp)) vpps = divisors(w.model.layers / pp);
            std::vector<bool> dopts{false};
            if (dp > 1 && plannable(Dimension::distributed_optimizer)) dopts = {false, true};
            std::vector<Recompute> recomputes{Recompute::none};
            if (plannable(Dimension::recompute)) {
              recomputes = {Recompute::none, Recompute::selective, Recompute::full};
            }
            for (int64_t mb : micro) {
              for (SP sp : sps) {
                for (int64_t vpp : vpps) {
                  for (bool dopt : dopts) {
                    for (Recompute rc : recomputes) {
                      Layout l{.tp = static_cast<int>(tp),
                               .sp = sp,
                               .pp = static_cast<int>(pp),
                               .vpp = static_cast<int>(vpp),
                               .schedule = vpp > 1 ? PipelineSchedule::interleaved
                                                   : PipelineSchedule::one_f_one_b,
                               .cp = static_cast<int>(cp),
                               .ep = static_cast<int>(ep),
                               .gtp = static_cast<int>(gtp),
                               .dp = static_cast<int>(dp),
                               .micro_batch = mb,
                               .grad_accum = per_rank / mb,
                               .distributed_optimizer = dopt,
                               .recompute = rc};
                      // weft train splits the layers evenly into pp·vpp
                      // chunks (the balance with the embedding and head
                      // counted as layers is --evaluate's, for Llama 3).
                      if (vpp > 1 && w.model.layers % (pp * vpp) != 0) continue;
                      if (layout_problem(w, l, world, global_batch).empty()) out.push_back(l);
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

PlanResult plan_layouts(const PlanRequest& req, const Machine& machine) {
  WEFT_CHECK(req.world >= 1 && req.world <= kMaxWorld, "--world must lie in [1, {}], got {}",
             kMaxWorld, req.world);
  WEFT_CHECK(req.global_batch >= 1, "--global-batch must be at least 1, got {}", req.global_batch);
  const std::vector<Layout> layouts = enumerate_layouts(req.workload, req.world, req.global_batch);
  WEFT_CHECK(!layouts.empty(),
             "no layout of {} ranks trains this model at --global-batch {}: the batch must split "
             "over the data-parallel ranks and the heads over --tp; try a --global-batch that is "
             "a multiple of --world",
             req.world, req.global_batch);
  const MemoryModel memory(req.workload);
  PlanResult r;
  r.considered = layouts.size();
  for (const Layout& l : layouts) {
    PlannedLayout p{.layout = l, .memory = memory.peak(l), .cost = {}};
    if (r.smallest.memory.total() == 0 || p.memory.total() < r.smallest.memory.total()) {
      p.cost = predict_step(req.workload, l, machine);
      r.smallest = p;
    }
    if (req.memory_limit > 0 && p.memory.total() > req.memory_limit) continue;
    p.cost = predict_step(req.workload, l, machine);
    r.fits.push_back(p);
  }
  // Predictions closer than 0.25% are a tie (layouts that differ by little
  // more than a kernel call's fixed cost): among them the layout that needs
  // less memory goes first (headroom). The speeds are compared in 0.25%
  // steps (a logarithmic grid), which keeps the order strict.
  auto step = [](const PlannedLayout& p) {
    return static_cast<int64_t>(
        std::floor(std::log(std::max(p.cost.tokens_per_s, 1e-30)) / std::log(1.0025)));
  };
  std::stable_sort(r.fits.begin(), r.fits.end(),
                   [&](const PlannedLayout& a, const PlannedLayout& b) {
                     const int64_t sa = step(a), sb = step(b);
                     if (sa != sb) return sa > sb;
                     return a.memory.total() < b.memory.total();
                   });
  return r;
}

}  // namespace weft::plan
