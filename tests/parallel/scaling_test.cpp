#include "weft/parallel/scaling.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "weft/comm/local.h"
#include "weft/kernels/cast.h"

namespace weft::parallel {
namespace {

Precision delayed(AmaxAlgo algo, int margin, int history = 3) {
  Precision p = Precision::of(Recipe::fp8_delayed);
  p.amax_algo = algo;
  p.margin = margin;
  p.amax_history = history;
  return p;
}

TEST(DelayedScaling, HistoryRollsAndScaleFollowsTheWindowMax) {
  const Precision p = delayed(AmaxAlgo::max, 0);
  ScalingRegistry r;
  const int id = r.add("x", 448.0f, 3);
  EXPECT_EQ(r.state(id).scale, 1.0f);  // before any step
  // Step 1: two quantizations record their max.
  r.record(id, 2.0f);
  r.record(id, 7.0f);
  EXPECT_EQ(r.state(id).amax_history, (std::vector<float>{7, 0, 0}));
  r.end_step(p, nullptr);
  EXPECT_EQ(r.state(id).scale, 448.0f / 7.0f);
  EXPECT_EQ(r.state(id).amax_history, (std::vector<float>{0, 0, 7}));
  r.record(id, 1.0f);
  r.end_step(p, nullptr);
  EXPECT_EQ(r.state(id).amax_history, (std::vector<float>{0, 7, 1}));
  EXPECT_EQ(r.state(id).scale, 448.0f / 7.0f);  // 7 is still in the window
  r.record(id, 2.0f);
  r.end_step(p, nullptr);
  EXPECT_EQ(r.state(id).amax_history, (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(r.state(id).scale, 448.0f / 7.0f);  // computed before the roll dropped 7
  r.record(id, 0.5f);
  r.end_step(p, nullptr);
  EXPECT_EQ(r.state(id).scale, 448.0f / 2.0f);  // window {1, 2, 0.5}
  EXPECT_EQ(r.steps(), 4u);
}

TEST(DelayedScaling, MostRecentAndMargin) {
  const Precision p = delayed(AmaxAlgo::most_recent, 2);
  ScalingRegistry r;
  const int id = r.add("dy", 57344.0f, 4);
  r.record(id, 8.0f);
  r.end_step(p, nullptr);
  EXPECT_EQ(r.state(id).scale, 57344.0f / 8.0f / 4.0f);
  r.record(id, 1.0f);
  r.end_step(p, nullptr);
  EXPECT_EQ(r.state(id).scale, 57344.0f / 1.0f / 4.0f);  // the older 8 is ignored
}

TEST(DelayedScaling, ZeroAndNonFiniteAmaxKeepThePreviousScale) {
  const Precision p = delayed(AmaxAlgo::most_recent, 0, 1);
  ScalingRegistry r;
  const int id = r.add("w", 448.0f, 1);
  r.record(id, 4.0f);
  r.end_step(p, nullptr);
  EXPECT_EQ(r.state(id).scale, 112.0f);
  r.end_step(p, nullptr);  // nothing recorded: amax 0
  EXPECT_EQ(r.state(id).scale, 112.0f);
  r.record(id, std::numeric_limits<float>::infinity());
  r.end_step(p, nullptr);
  EXPECT_EQ(r.state(id).scale, 112.0f);
  r.record(id, std::numeric_limits<float>::quiet_NaN());  // dropped, as fmax drops it
  EXPECT_EQ(r.state(id).amax_history[0], 0.0f);
  r.end_step(p, nullptr);
  EXPECT_EQ(r.state(id).scale, 112.0f);
  // A subnormal amax overflows the scale: FLT_MAX instead of Inf.
  r.record(id, 1e-40f);
  r.end_step(p, nullptr);
  EXPECT_EQ(r.state(id).scale, FLT_MAX);
}

TEST(DelayedScaling, AmaxReductionGivesEveryRankTheSameScales) {
  // Four ranks record different amaxes for three tensors; one coalesced
  // all-reduce makes every rank's scales the group's.
  std::vector<std::vector<float>> scales(4);
  comm::run_local(4, [&](comm::ProcessGroup& world) {
    const Precision p = delayed(AmaxAlgo::max, 0);
    ScalingRegistry r;
    for (int i = 0; i < 3; ++i) r.add("t" + std::to_string(i), 448.0f, 3);
    for (int i = 0; i < 3; ++i) r.record(i, static_cast<float>((world.rank() + i) % 4 + 1));
    const int64_t before = world.stats().count(comm::OpKind::all_reduce);
    r.end_step(p, &world);
    EXPECT_EQ(world.stats().count(comm::OpKind::all_reduce) - before, 1);
    for (int i = 0; i < 3; ++i)
      scales[static_cast<size_t>(world.rank())].push_back(r.state(i).scale);
  });
  for (const auto& s : scales) EXPECT_EQ(s, (std::vector<float>{112.0f, 112.0f, 112.0f}));
}

TEST(DelayedScaling, SnapshotRestoresExactlyAndRejectsAnotherModel) {
  const Precision p = delayed(AmaxAlgo::max, 1, 5);
  ScalingRegistry a;
  a.add("x", 448.0f, 5);
  a.add("w", 448.0f, 5);
  for (int s = 0; s < 7; ++s) {
    a.record(0, 1.0f + 0.1f * static_cast<float>(s));
    a.record(1, 3.0f / static_cast<float>(s + 1));
    a.end_step(p, nullptr);
  }
  ScalingRegistry b;
  b.add("x", 448.0f, 5);
  b.add("w", 448.0f, 5);
  b.restore(a.snapshot());
  EXPECT_EQ(b.steps(), a.steps());
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(b.state(i).scale, a.state(i).scale);
    EXPECT_EQ(b.state(i).amax_history, a.state(i).amax_history);
  }
  ScalingRegistry c;
  c.add("x", 448.0f, 5);
  EXPECT_THROW(c.restore(a.snapshot()), Error);
  ScalingRegistry d;
  d.add("x", 448.0f, 5);
  d.add("w", 448.0f, 5);
  d.add("z", 448.0f, 5);
  EXPECT_THROW(d.restore(a.snapshot()), Error);
}

// Under expert parallelism the state comes from a rank that held other
// experts: experts match by name, the others start afresh.
TEST(DelayedScaling, RestoreMatchesExpertsByName) {
  const Precision p = delayed(AmaxAlgo::max, 1, 5);
  ScalingRegistry a;
  a.add("m.experts.0.input", 448.0f, 5);
  a.add("x", 448.0f, 5);
  a.record(0, 2.0f);
  a.record(1, 4.0f);
  a.end_step(p, nullptr);
  ScalingRegistry b;
  b.add("x", 448.0f, 5);
  b.add("m.experts.1.input", 448.0f, 5);
  b.restore(a.snapshot());
  EXPECT_EQ(b.state(0).scale, a.state(1).scale);
  EXPECT_EQ(b.state(0).amax_history, a.state(1).amax_history);
  EXPECT_EQ(b.state(1).scale, 1.0f);
}

}  // namespace
}  // namespace weft::parallel

namespace weft::parallel {
namespace {

// Quantizations that fold their amaxes into the registry's accumulator (no
// host read on a GPU) leave the same state at end_step as recording each
// amax: a running max, NaN dropped, zeros changing nothing.
TEST(DelayedScaling, AccumulatedAmaxesEqualRecordedOnes) {
  ScalingRegistry recorded, folded;
  for (ScalingRegistry* r : {&recorded, &folded}) {
    r->add("a", 448.0f, 3);
    r->add("b", 57344.0f, 3);
  }
  const Precision p = Precision::of(Recipe::fp8_delayed);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::vector<std::pair<int, float>>> steps = {
      {{0, 2.5f}, {1, 7.0f}, {0, 3.0f}}, {{0, nan}, {1, 0.0f}, {0, 1.25f}}, {{1, 1e30f}}};
  for (const auto& step : steps) {
    for (const auto& [id, amax] : step) {
      recorded.record(id, amax);
      // A tensor whose amax is `amax`, quantized with the accumulator.
      const Tensor x = Tensor::from({2, 2}, std::vector<float>{0.5f * amax, -amax, 0.0f, 0.0f});
      kernels::QuantizeConfig cfg;
      cfg.scale = 1.0f;
      cfg.amax_accumulator = folded.amax_accumulator(Device::cpu());
      cfg.amax_slot = id;
      QuantizedTensor q;
      kernels::quantize(ExecContext::host(), x, cfg, q);
    }
    recorded.end_step(p, nullptr);
    folded.end_step(p, nullptr);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(folded.state(i).scale, recorded.state(i).scale) << i;
      EXPECT_EQ(folded.state(i).amax_history, recorded.state(i).amax_history) << i;
    }
  }
  EXPECT_EQ(recorded.state(1).amax_history[2], 1e30f);  // the last step reached the history
}

}  // namespace
}  // namespace weft::parallel
