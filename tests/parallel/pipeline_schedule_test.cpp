// Pipeline schedules checked as data, apart from any model: every schedule
// over a range of (P, V, M) passes the checker (no deadlock, forward before
// backward, channels in order, every pass once), keeps its activation bound,
// and has its theoretical bubble; the checker itself catches each kind of
// broken list.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "weft/core/error.h"
#include "weft/parallel/pipeline/schedule.h"
#include "weft/parallel/pipeline/simulate.h"
#include "weft/parallel/pipeline/stages.h"

namespace weft::parallel::pipeline {
namespace {

using AK = ActionKind;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

struct Case {
  ScheduleKind kind;
  int P, V, M;
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (int P : {1, 2, 3, 4, 8}) {
    for (int M = 1; M <= 16; ++M) {
      cases.push_back({ScheduleKind::gpipe, P, 1, M});
      cases.push_back({ScheduleKind::one_f_one_b, P, 1, M});
      cases.push_back({ScheduleKind::zero_bubble, P, 1, M});
      if (M % P == 0) {
        for (int V : {1, 2, 3}) cases.push_back({ScheduleKind::interleaved, P, V, M});
      }
    }
  }
  return cases;
}

TEST(PipelineSchedule, EverySchedulePassesTheChecker) {
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(format("{} P={} V={} M={}", schedule_kind_name(c.kind), c.P, c.V, c.M));
    const PipelineSchedule s = make_schedule(c.kind, c.P, c.V, c.M);
    ASSERT_EQ(static_cast<int>(s.actions.size()), c.P);
    // Default costs, uneven costs and a slow link: the lists are the same,
    // the checker must pass them all.
    for (const ComputeCosts& costs :
         {ComputeCosts{}, ComputeCosts{.forward = 2, .backward_input = 3, .backward_weight = 1}}) {
      for (double transfer : {0.0, 0.5}) {
        const Simulation sim = simulate(s, costs, transfer);
        for (int r = 0; r < c.P; ++r) {
          EXPECT_DOUBLE_EQ(sim.busy[r], c.V * c.M * (costs.forward + costs.backward()));
        }
      }
    }
  }
}

TEST(PipelineSchedule, OneFOneBKeepsAtMostPMinusRankAlive) {
  for (int P : {1, 2, 3, 4, 8}) {
    for (int M = 1; M <= 16; ++M) {
      const Simulation sim = simulate(make_schedule(ScheduleKind::one_f_one_b, P, 1, M));
      for (int r = 0; r < P; ++r) EXPECT_EQ(sim.peak_alive[r], std::min(P - r, M)) << P << M;
      EXPECT_LE(sim.peak_alive[0], P);
      const Simulation g = simulate(make_schedule(ScheduleKind::gpipe, P, 1, M));
      for (int r = 0; r < P; ++r) EXPECT_EQ(g.peak_alive[r], M);
    }
  }
}

TEST(PipelineSchedule, ZeroBubbleKeepsOneFOneBsMemoryBound) {
  for (int P : {1, 2, 3, 4, 8}) {
    for (int M = 1; M <= 16; ++M) {
      const Simulation sim = simulate(make_schedule(ScheduleKind::zero_bubble, P, 1, M));
      for (int r = 0; r < P; ++r) {
        EXPECT_LE(sim.peak_alive[r], std::min(P - r, M)) << P << " " << M;
        EXPECT_LE(sim.peak_pending[r], std::min(P, M)) << P << " " << M;
      }
    }
  }
}

TEST(PipelineSchedule, BubblesMatchTheory) {
  for (int P : {1, 2, 3, 4, 8}) {
    for (int M = 1; M <= 16; ++M) {
      SCOPED_TRACE(format("P={} M={}", P, M));
      for (ScheduleKind k : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b}) {
        const Simulation sim = simulate(make_schedule(k, P, 1, M));
        EXPECT_NEAR(sim.bubble(), theoretical_bubble(k, P, 1, M), 1e-12);
        EXPECT_DOUBLE_EQ(sim.makespan, 3.0 * (M + P - 1));
      }
      const double one_f_one_b = theoretical_bubble(ScheduleKind::one_f_one_b, P, 1, M);
      const Simulation zb = simulate(make_schedule(ScheduleKind::zero_bubble, P, 1, M));
      if (M >= P) {
        // ZB-H1's bubble, (P-1)(F+BI-BW) at unit costs, once the pipeline fills.
        EXPECT_NEAR(zb.bubble(), theoretical_bubble(ScheduleKind::zero_bubble, P, 1, M), 1e-12);
      }
      if (P > 1) {
        EXPECT_LT(zb.bubble(), one_f_one_b);
      }
      if (M % P == 0 && M > P) {
        for (int V : {2, 3}) {
          const Simulation sim = simulate(make_schedule(ScheduleKind::interleaved, P, V, M));
          EXPECT_NEAR(sim.bubble(), theoretical_bubble(ScheduleKind::interleaved, P, V, M), 1e-12)
              << "V=" << V;
          if (P > 1) {
            EXPECT_LT(sim.bubble(), one_f_one_b);
          }
        }
      }
    }
  }
}

TEST(PipelineSchedule, OneFOneBListsAreWarmupSteadyCooldown) {
  const PipelineSchedule s = make_schedule(ScheduleKind::one_f_one_b, 4, 1, 6);
  std::vector<std::string> rank0, rank3;
  for (const Action& a : s.actions[0]) rank0.push_back(action_str(a));
  for (const Action& a : s.actions[3]) rank3.push_back(action_str(a));
  const std::vector<std::string> want0 = {
      "F0@s0",     "SA0@s0->1", "F1@s0",     "SA1@s0->1", "F2@s0",     "SA2@s0->1",
      "F3@s0",     "SA3@s0->1", "RG0@s0<-1", "B0@s0",     "F4@s0",     "SA4@s0->1",
      "RG1@s0<-1", "B1@s0",     "F5@s0",     "SA5@s0->1", "RG2@s0<-1", "B2@s0",
      "RG3@s0<-1", "B3@s0",     "RG4@s0<-1", "B4@s0",     "RG5@s0<-1", "B5@s0"};
  EXPECT_EQ(rank0, want0);
  ASSERT_EQ(rank3.size(), 6u * 4u);
  EXPECT_EQ(rank3[0], "RA0@s3<-2");
  EXPECT_EQ(rank3[1], "F0@s3");
  EXPECT_EQ(rank3[2], "B0@s3");
  EXPECT_EQ(rank3[3], "SG0@s3->2");
}

TEST(PipelineSchedule, InterleavedChunksWrapAroundTheRanks) {
  const PipelineSchedule s = make_schedule(ScheduleKind::interleaved, 2, 2, 4);
  EXPECT_EQ(s.stages(), 4);
  // Rank 1 holds stages 1 and 3; its first chunk-1 forward receives from rank 0's stage 2.
  bool saw = false;
  for (const Action& a : s.actions[1]) {
    EXPECT_EQ(a.stage % 2, 1);
    if (a.kind == AK::recv_activation && a.stage == 3) {
      EXPECT_EQ(a.peer, 0);
      saw = true;
    }
  }
  EXPECT_TRUE(saw);
  // Rank 0 receives stage 2's input from rank 1 (stage 1): the wrap.
  for (const Action& a : s.actions[0]) {
    if (a.kind == AK::recv_activation) {
      EXPECT_EQ(a.stage, 2);
      EXPECT_EQ(a.peer, 1);
    }
  }
}

TEST(PipelineSchedule, TimelinePrintsOneRowPerRank) {
  const PipelineSchedule s = make_schedule(ScheduleKind::gpipe, 2, 1, 2);
  const std::string t = format_timeline(s, simulate(s));
  EXPECT_EQ(t,
            "rank 0 | F0 F1 .  .  .  B0 -  B1 -\n"
            "rank 1 | .  F0 F1 B0 -  B1 -  .  .\n");
  const PipelineSchedule z = make_schedule(ScheduleKind::zero_bubble, 2, 1, 4);
  const std::string zt = format_timeline(z, simulate(z));
  EXPECT_NE(zt.find("rank 1 |"), std::string::npos);
  EXPECT_NE(zt.find("W3"), std::string::npos);
  const PipelineSchedule i = make_schedule(ScheduleKind::interleaved, 2, 2, 2);
  EXPECT_NE(format_timeline(i, simulate(i)).find("F1.1"), std::string::npos);
}

// The checker on broken lists: each violation is caught and named.
class BrokenSchedule : public ::testing::Test {
 protected:
  PipelineSchedule s = make_schedule(ScheduleKind::one_f_one_b, 2, 1, 2);
  size_t find(int rank, AK kind, int m) {
    const auto& l = s.actions[rank];
    for (size_t i = 0; i < l.size(); ++i) {
      if (l[i].kind == kind && l[i].microbatch == m) return i;
    }
    ADD_FAILURE() << "no such action";
    return 0;
  }
  std::string check() {
    return error_of([&] { simulate(s); });
  }
};

TEST_F(BrokenSchedule, TheUnbrokenOnePasses) { EXPECT_EQ(check(), ""); }

TEST_F(BrokenSchedule, ReceivesInTheWrongOrder) {
  std::swap(s.actions[1][find(1, AK::recv_activation, 0)],
            s.actions[1][find(1, AK::recv_activation, 1)]);
  EXPECT_NE(check().find("different orders"), std::string::npos) << check();
}

TEST_F(BrokenSchedule, Deadlock) {
  // Rank 0 waits for micro-batch 0's gradient before it sends any activation.
  auto& l = s.actions[0];
  const size_t recv = find(0, AK::recv_grad, 0);
  const Action a = l[recv];
  l.erase(l.begin() + static_cast<long>(recv));
  l.insert(l.begin(), a);
  EXPECT_EQ(check(),
            "1f1b schedule (pp 2, vpp 1, 2 micro-batches) deadlocks: rank 0 waits at action 0 "
            "(RG0@s0<-1); rank 1 waits at action 0 (RA0@s1<-0)");
}

TEST_F(BrokenSchedule, BackwardBeforeForward) {
  auto& l = s.actions[1];
  std::swap(l[find(1, AK::forward, 0)], l[find(1, AK::backward, 0)]);
  EXPECT_NE(check().find("backward before its forward"), std::string::npos) << check();
}

TEST_F(BrokenSchedule, ForwardBeforeItsInput) {
  auto& l = s.actions[1];
  std::swap(l[find(1, AK::recv_activation, 0)], l[find(1, AK::forward, 0)]);
  EXPECT_NE(check().find("forward before its input"), std::string::npos) << check();
}

TEST_F(BrokenSchedule, MissingPass) {
  auto& l = s.actions[0];
  l.erase(l.begin() + static_cast<long>(find(0, AK::backward, 1)));
  EXPECT_NE(check().find("micro-batch 1 on stage 0 (rank 0) misses a pass"), std::string::npos)
      << check();
}

TEST_F(BrokenSchedule, UnreceivedMessage) {
  auto& l = s.actions[0];
  l.erase(l.begin() + static_cast<long>(find(0, AK::recv_grad, 1)));
  EXPECT_NE(check().find("backward before its output gradient"), std::string::npos) << check();
}

TEST_F(BrokenSchedule, WrongRank) {
  s.actions[0][find(0, AK::forward, 1)].stage = 1;
  EXPECT_NE(check().find("stage 1 belongs to rank 1"), std::string::npos) << check();
}

TEST_F(BrokenSchedule, WeightGradientBeforeInputGradient) {
  s = make_schedule(ScheduleKind::zero_bubble, 2, 1, 2);
  auto& l = s.actions[1];
  std::swap(l[find(1, AK::backward_input, 0)], l[find(1, AK::backward_weight, 0)]);
  EXPECT_NE(check().find("weight gradient before its input gradient"), std::string::npos)
      << check();
}

TEST(PipelineSchedule, LayoutProblemsSayWhatWouldWork) {
  EXPECT_EQ(layout_problem(ScheduleKind::interleaved, 4, 2, 8), "");
  EXPECT_EQ(layout_problem(ScheduleKind::interleaved, 4, 2, 6),
            "--pp-schedule interleaved needs --grad-accum (micro-batches) a multiple of --pp 4, "
            "not 6: use 4 or 8");
  EXPECT_EQ(layout_problem(ScheduleKind::interleaved, 4, 2, 3),
            "--pp-schedule interleaved needs --grad-accum (micro-batches) a multiple of --pp 4, "
            "not 3: use 4");
  EXPECT_NE(layout_problem(ScheduleKind::one_f_one_b, 2, 2, 4).find("--vpp 2 needs"),
            std::string::npos);
  EXPECT_NE(error_of([] { make_schedule(ScheduleKind::zero_bubble, 2, 2, 4); }).find("--vpp"),
            std::string::npos);
}

TEST(PipelineStages, SplitsLayersOrSaysWhatWouldWork) {
  EXPECT_EQ(split_layers(4, 2, 1, "", false), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(split_layers(12, 4, 1, "", false), (std::vector<int64_t>{2, 4, 4, 2}));
  EXPECT_EQ(split_layers(12, 2, 1, "", false), (std::vector<int64_t>{6, 6}));
  EXPECT_EQ(split_layers(4, 4, 1, "", false), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(split_layers(8, 2, 2, "", true), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(split_layers(8, 2, 1, "3,5", false), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(layer_boundaries({3, 5}), (std::vector<int64_t>{0, 3, 8}));
  EXPECT_EQ(error_of([] { split_layers(8, 2, 1, "3,x", false); }),
            "--pp-layers 3,x: 'x' is not a layer count; give one count of at least 1 per stage, "
            "separated by commas (3,5,5,3)");
  EXPECT_EQ(error_of([] { split_layers(8, 2, 1, "99999999999999999,1", false); }),
            "--pp-layers 99999999999999999,1: a stage of 99999999999999999 layers is more than "
            "the model's 8 (--layers)");
  EXPECT_EQ(error_of([] { split_layers(8, 65536, 65536, "", true); }),
            "--pp 65536 x --vpp 65536 = 4294967296 stages is more than the model's 8 layers "
            "(--layers): each stage needs at least one layer; use at most 8 stages");
}

TEST(PipelineSchedule, KindNames) {
  for (ScheduleKind k : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::interleaved,
                         ScheduleKind::zero_bubble}) {
    EXPECT_EQ(parse_schedule_kind(schedule_kind_name(k)), k);
  }
  EXPECT_EQ(error_of([] { parse_schedule_kind("zb"); }),
            "unknown pipeline schedule 'zb': use gpipe, 1f1b, interleaved or zero-bubble");
  EXPECT_DOUBLE_EQ(theoretical_bubble(ScheduleKind::one_f_one_b, 4, 1, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(theoretical_bubble(ScheduleKind::interleaved, 4, 2, 8), 3.0 / 19.0);
  EXPECT_DOUBLE_EQ(theoretical_bubble(ScheduleKind::zero_bubble, 4, 1, 8), 3.0 / 27.0);
}

}  // namespace
}  // namespace weft::parallel::pipeline
