// The layout search and the cost model, on a machine described here (no
// probes): every enumerated layout valid, the limit filter, the order, the
// layout options round trip, the cluster description's checks.
#include "weft/plan/search.h"

#include <gtest/gtest.h>

#include <set>

#include "weft/plan/machine.h"

namespace weft::plan {
namespace {

// A CPU-like machine: 50 GFLOP/s GEMMs, 10 GB/s links, 20 µs collectives.
Machine test_machine() {
  Machine m;
  m.description = "test";
  m.gemm_peak = 50e9;
  m.gemm_half_flops = 1e6;
  m.attention_flops = 20e9;
  m.memory_bandwidth = 20e9;
  m.intra_bandwidth = 10e9;
  m.inter_bandwidth = 10e9;
  m.latency_s = 20e-6;
  m.peak_flops = 50e9;
  return m;
}

Workload workload(const std::string& preset, int64_t seq) {
  Workload w;
  w.model = nn::gpt_preset(preset);
  w.model.seq = seq;
  return w;
}

TEST(LayoutSearch, EveryEnumeratedLayoutIsValid) {
  for (const char* preset : {"tiny", "llama-tiny", "moe-tiny"}) {
    for (int world : {1, 2, 4, 8}) {
      const Workload w = workload(preset, 128);
      const int64_t batch = 16;
      const std::vector<Layout> layouts = enumerate_layouts(w, world, batch);
      ASSERT_FALSE(layouts.empty()) << preset << " " << world;
      for (const Layout& l : layouts) {
        SCOPED_TRACE(std::string(preset) + ": " + l.text());
        EXPECT_EQ(l.world(), world);
        EXPECT_EQ(l.global_batch(), batch);
        EXPECT_EQ(w.model.heads % l.tp, 0);
        const int64_t kv = w.model.kv_head_count();
        EXPECT_TRUE(kv % l.tp == 0 || l.tp % kv == 0);
        if (l.gtp > 1) {
          EXPECT_LE(l.tp, kv);
        }
        if (w.model.moe_experts > 0) {
          EXPECT_EQ(w.model.moe_experts % l.ep, 0);
        } else {
          EXPECT_EQ(l.ep, 1);
        }
        if (l.sp == parallel::SequenceParallel::batch) {
          EXPECT_EQ(l.micro_batch % l.tp, 0);
        }
        if (l.sp != parallel::SequenceParallel::off) {
          EXPECT_GT(l.tp, 1);
        }
        EXPECT_EQ(layout_problem(w, l, world, batch), "");
        // The dimensions weft train does not accept yet stay at their defaults.
        EXPECT_EQ(l.pp, 1);
        EXPECT_EQ(l.cp, 1);
        EXPECT_EQ(l.vpp, 1);
        EXPECT_FALSE(l.distributed_optimizer);
        EXPECT_EQ(l.recompute, Recompute::none);
      }
    }
  }
}

TEST(LayoutSearch, WithEveryDimensionOnEachLayoutIsValidAndPriced) {
  const std::vector<Dimension> all{Dimension::tp,          Dimension::sp,
                                   Dimension::pp,          Dimension::vpp,
                                   Dimension::cp,          Dimension::ep,
                                   Dimension::gtp,         Dimension::dp,
                                   Dimension::micro_batch, Dimension::distributed_optimizer,
                                   Dimension::recompute};
  Workload w = workload("llama-tiny", 128);
  w.model.layers = 8;
  const std::vector<Layout> layouts = enumerate_layouts(w, 8, 16, all);
  std::set<int> pps, cps, vpps;
  int dopt = 0, full = 0, selective = 0;
  for (const Layout& l : layouts) {
    SCOPED_TRACE(l.text());
    EXPECT_EQ(layout_problem(w, l, 8, 16), "");
    EXPECT_EQ(parse_layout_args(l.args()).args(), l.args());
    if (l.vpp > 1) {
      EXPECT_EQ(w.model.layers % (l.pp * l.vpp), 0);
    }
    pps.insert(l.pp);
    cps.insert(l.cp);
    vpps.insert(l.vpp);
    dopt += l.distributed_optimizer;
    full += l.recompute == Recompute::full;
    selective += l.recompute == Recompute::selective;
    const MemoryBreakdown m = MemoryModel(w).peak(l);
    const StepCost c = predict_step(w, l, test_machine());
    EXPECT_GT(m.total(), 0);
    EXPECT_GT(c.tokens_per_s, 0);
  }
  EXPECT_EQ(pps, (std::set<int>{1, 2, 4, 8}));
  EXPECT_EQ(cps, (std::set<int>{1, 2, 4, 8}));
  EXPECT_TRUE(vpps.count(2));
  EXPECT_GT(dopt, 0);
  EXPECT_GT(full, 0);
  EXPECT_GT(selective, 0);
}

TEST(LayoutSearch, CoversEveryPlannableDimension) {
  const std::vector<Layout> layouts = enumerate_layouts(workload("moe-tiny", 128), 4, 16);
  std::set<int> tps, eps, gtps, dps;
  std::set<int64_t> micro;
  std::set<parallel::SequenceParallel> sps;
  for (const Layout& l : layouts) {
    tps.insert(l.tp);
    eps.insert(l.ep);
    gtps.insert(l.gtp);
    dps.insert(l.dp);
    micro.insert(l.micro_batch);
    sps.insert(l.sp);
  }
  EXPECT_EQ(tps, (std::set<int>{1, 2, 4}));
  EXPECT_EQ(eps, (std::set<int>{1, 2, 4}));
  EXPECT_EQ(gtps, (std::set<int>{1, 2, 4}));
  EXPECT_EQ(dps, (std::set<int>{1, 2, 4}));
  EXPECT_EQ(sps.size(), 3u);
  EXPECT_TRUE(micro.count(1) && micro.count(16));
}

TEST(LayoutSearch, NamesWhatIsWrongWithALayout) {
  const Workload llama = workload("llama-tiny", 128);
  EXPECT_NE(layout_problem(llama, Layout{.tp = 3, .micro_batch = 1}, 3, 1)
                .find("heads 8 is not divisible by tp 3"),
            std::string::npos);
  EXPECT_NE(layout_problem(llama, Layout{.ep = 2, .micro_batch = 1}, 2, 2).find("MoE"),
            std::string::npos);
  EXPECT_NE(layout_problem(workload("moe-tiny", 128), Layout{.ep = 3, .micro_batch = 1}, 3, 3)
                .find("does not divide the 4 experts"),
            std::string::npos);
  EXPECT_NE(
      layout_problem(llama, Layout{.tp = 8, .gtp = 2, .micro_batch = 1}, 16, 2).find("replicated"),
      std::string::npos);
  EXPECT_NE(layout_problem(llama, Layout{.cp = 3, .micro_batch = 1}, 3, 1).find("--seq 128"),
            std::string::npos);
  EXPECT_NE(layout_problem(llama, Layout{.pp = 2, .vpp = 3, .micro_batch = 1}, 2, 1).find("--vpp"),
            std::string::npos);
  EXPECT_NE(layout_problem(llama, Layout{.distributed_optimizer = true}, 1, 1).find("dp above 1"),
            std::string::npos);
  EXPECT_NE(
      layout_problem(
          llama, Layout{.tp = 2, .sp = parallel::SequenceParallel::batch, .micro_batch = 1}, 2, 1)
          .find("--sp batch"),
      std::string::npos);
  EXPECT_NE(layout_problem(llama, Layout{.dp = 2, .micro_batch = 3}, 2, 8).find("not 8"),
            std::string::npos);
}

TEST(LayoutSearch, DropsLayoutsOverTheLimitAndSortsFastestFirst) {
  PlanRequest req{.workload = workload("llama-tiny", 128), .world = 4, .global_batch = 16};
  const PlanResult all = plan_layouts(req, test_machine());
  ASSERT_EQ(all.fits.size(), all.considered);
  for (size_t i = 1; i < all.fits.size(); ++i) {
    // Fastest first; within 0.25% of each other, smaller memory first.
    const PlannedLayout& a = all.fits[i - 1];
    const PlannedLayout& b = all.fits[i];
    EXPECT_GE(a.cost.tokens_per_s * 1.00251, b.cost.tokens_per_s);
    if (b.cost.tokens_per_s > a.cost.tokens_per_s) {
      EXPECT_LT(a.memory.total(), b.memory.total());
    }
  }
  int64_t lo = INT64_MAX, hi = 0;
  for (const PlannedLayout& p : all.fits) {
    lo = std::min(lo, p.memory.total());
    hi = std::max(hi, p.memory.total());
  }
  EXPECT_EQ(all.smallest.memory.total(), lo);
  req.memory_limit = (lo + hi) / 2;
  const PlanResult some = plan_layouts(req, test_machine());
  EXPECT_LT(some.fits.size(), all.fits.size());
  EXPECT_FALSE(some.fits.empty());
  for (const PlannedLayout& p : some.fits) EXPECT_LE(p.memory.total(), req.memory_limit);
  req.memory_limit = lo - 1;
  const PlanResult none = plan_layouts(req, test_machine());
  EXPECT_TRUE(none.fits.empty());
  EXPECT_EQ(none.smallest.memory.total(), lo);
  req.world = 16;
  req.global_batch = 3;
  EXPECT_THROW(plan_layouts(req, test_machine()), Error);
}

TEST(LayoutArgs, RoundTripAndRefuseOtherOptions) {
  const Layout l{.tp = 8,
                 .sp = parallel::SequenceParallel::seq,
                 .pp = 16,
                 .vpp = 2,
                 .schedule = PipelineSchedule::interleaved,
                 .cp = 2,
                 .dp = 64,
                 .micro_batch = 1,
                 .grad_accum = 32,
                 .distributed_optimizer = true,
                 .recompute = Recompute::full,
                 .recompute_layers = 3};
  const Layout back = parse_layout_args(l.args());
  EXPECT_EQ(back.args(), l.args());
  EXPECT_EQ(back.world(), 8 * 16 * 2 * 64);
  EXPECT_EQ(parse_layout_args("--tp 2 --micro-batch 4").args(),
            (std::vector<std::string>{"--tp", "2", "--micro-batch", "4"}));
  EXPECT_EQ(parse_layout_args("--pp=4 --vpp=2").schedule, PipelineSchedule::interleaved);
  EXPECT_THROW(parse_layout_args("--lr 3"), Error);
  EXPECT_THROW(parse_layout_args("--tp x"), Error);
  EXPECT_THROW(parse_layout_args("--tp"), Error);
  EXPECT_THROW(parse_layout_args("tp 2"), Error);
  EXPECT_THROW(parse_layout_args("--pp-schedule 2f2b"), Error);
}

TEST(CostModel, PricesEachDimensionsCommunicationAndTheBubble) {
  const Workload w = workload("llama-tiny", 256);
  const Machine m = test_machine();
  const StepCost one = predict_step(w, Layout{.micro_batch = 8}, m);
  EXPECT_EQ(one.tp_comm, 0);
  EXPECT_EQ(one.dp_comm, 0);
  EXPECT_GT(one.tokens_per_s, 0);
  EXPECT_GT(predict_step(w, Layout{.tp = 2, .micro_batch = 8}, m).tp_comm, 0);
  EXPECT_GT(predict_step(w, Layout{.dp = 2, .micro_batch = 4}, m).dp_comm, 0);
  Machine slow = m;
  slow.intra_bandwidth = slow.inter_bandwidth = 1e6;
  EXPECT_GT(predict_step(w, Layout{.gtp = 2, .micro_batch = 4}, slow).gtp_comm, 0);
  EXPECT_EQ(predict_step(w, Layout{.micro_batch = 4}, slow).gtp_comm, 0);
  Layout pipe{.pp = 4, .micro_batch = 1, .grad_accum = 8};
  const double b1f1b = predict_step(w, pipe, m).bubble;
  pipe.schedule = PipelineSchedule::zero_bubble;
  const double zb = predict_step(w, pipe, m).bubble;
  EXPECT_GT(b1f1b, 0);
  EXPECT_LT(zb, b1f1b);
  Workload eight = w;
  eight.model.layers = 8;
  Layout inter{.pp = 4, .micro_batch = 1, .grad_accum = 8};
  const double plain = predict_step(eight, inter, m).bubble;
  inter.schedule = PipelineSchedule::interleaved;
  inter.vpp = 2;
  EXPECT_NEAR(predict_step(eight, inter, m).bubble, plain / 2, plain * 0.05);
  // Recomputation costs time.
  Layout full{.micro_batch = 8, .recompute = Recompute::full};
  EXPECT_GT(predict_step(w, full, m).total, one.total);
  // The world's peak: MFU = tokens/s x model FLOPs per token / (ranks x peak).
  EXPECT_NEAR(one.mfu, one.tokens_per_s * one.model_flops_per_token / m.peak_flops, 1e-12);
}

TEST(ClusterDescription, DefaultsAndChecks) {
  const Machine h100 = default_gpu_cluster();
  EXPECT_TRUE(h100.gpu);
  EXPECT_EQ(h100.ranks_per_node, 8);
  EXPECT_DOUBLE_EQ(h100.peak_flops, 989.4e12);
  const Machine m = parse_cluster(R"({"gpus_per_node": 4, "network_GBps": 25})", "c.json");
  EXPECT_EQ(m.ranks_per_node, 4);
  EXPECT_DOUBLE_EQ(m.inter_bandwidth, 25e9);
  for (const char* bad : {R"({"gpus": 8})", R"({"nvlink_GBps": -1})", R"({"gpus_per_node": 1.5})",
                          R"({"gemm_efficiency": 2})", R"([1])", R"({"name": 3})", "{"}) {
    EXPECT_THROW(parse_cluster(bad, "c.json"), Error) << bad;
  }
}

}  // namespace
}  // namespace weft::plan
