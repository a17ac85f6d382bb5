#include <gtest/gtest.h>

#include <cmath>

#include "contexts.h"
#include "testing.h"
#include "weft/comm/grid.h"
#include "weft/comm/local.h"
#include "weft/kernels/optimizer.h"
#include "weft/nn/linear.h"
#include "weft/optim/adamw.h"
#include "weft/optim/grad_norm.h"
#include "weft/optim/grad_sync.h"

namespace weft::optim {
namespace {

using weft::testing::random_tensor;

nn::Parameter param(const std::string& name, std::vector<float> value, bool decay) {
  nn::ShardSpec spec;
  spec.global_shape = Shape{static_cast<int64_t>(value.size())};
  return nn::make_parameter(name, Tensor::from(spec.global_shape, value), spec, decay);
}

TEST(AdamW, DecaysOnlyMarkedParametersAndCountsSteps) {
  nn::Parameter w = param("w", {1, 2}, true), b = param("b", {1, 2}, false);
  w.grad.fill(0);
  b.grad.fill(0);
  AdamW opt({&w, &b}, {.weight_decay = 0.5f});
  opt.step(0.1f);
  EXPECT_EQ(opt.steps_taken(), 1);
  // Zero gradient: only decoupled decay moves w (p -= lr·wd·p), b stays.
  EXPECT_FLOAT_EQ(w.value.item(0), 1.0f - 0.1f * 0.5f * 1.0f);
  EXPECT_FLOAT_EQ(b.value.item(1), 2.0f);
}

TEST(AdamW, MatchesTheKernelStepByStep) {
  nn::Parameter w = param("w", {0.5f, -1.0f, 2.0f}, true);
  Tensor ref = w.value.clone(), m = Tensor::zeros({3}), v = Tensor::zeros({3});
  AdamW opt({&w}, {.weight_decay = 0.1f});
  for (int s = 1; s <= 3; ++s) {
    w.grad.copy_from(Tensor::from({3}, std::vector<float>{0.1f * s, -0.2f, 0.3f}));
    opt.step(0.01f, 0.5f);
    kernels::adamw_step(ExecContext::host(), ref, w.grad, m, v,
                        {.lr = 0.01f, .weight_decay = 0.1f, .step = s, .grad_scale = 0.5f});
  }
  EXPECT_EQ(w.value.to_vector(), ref.to_vector());
}

// The gradients of a column+row Linear pair at TP=t (grid tp × dp) have the
// same global norm as at TP=1: split parameters are summed over TP, the
// replicated row bias is counted once, DP replicas once.
void check_norm(comm::ProcessGroup& world, int tp_size) {
  comm::Grid grid(world, "tp-dp", {{"tp", tp_size}});
  Tensor x = random_tensor({4, 8}, 1), dy = random_tensor({4, 8}, 2);
  auto run = [&](std::shared_ptr<comm::ProcessGroup> tp, Groups groups) {
    nn::Linear a(ctx_of(tp, parallel::SequenceParallel::off, DType::f32, 3),
                 {.name = "a", .in = 8, .out = 12, .mode = nn::Parallel::column});
    nn::Linear b(ctx_of(tp, parallel::SequenceParallel::off, DType::f32, 3),
                 {.name = "b", .in = 12, .out = 8, .mode = nn::Parallel::row});
    nn::Ctx ctx;
    b.forward(ctx, a.forward(ctx, x));
    a.backward(ctx, b.backward(ctx, dy));
    std::vector<nn::Parameter*> ps = a.parameters();
    for (nn::Parameter* p : b.parameters()) ps.push_back(p);
    return global_grad_norm(ps, groups);
  };
  double ref = run(nullptr, {});
  double got =
      run(grid.group_ptr("tp"), {{"tp", grid.group_ptr("tp")}, {"dp", grid.group_ptr("dp")}});
  EXPECT_NEAR(got, ref, 1e-5 * ref);
}

TEST(GradNorm, CountsEachParameterOnceAtAnyLayout) {
  comm::run_local(1, [](comm::ProcessGroup& w) { check_norm(w, 1); });
  comm::run_local(2, [](comm::ProcessGroup& w) { check_norm(w, 2); });
  comm::run_local(4, [](comm::ProcessGroup& w) { check_norm(w, 2); });
  comm::run_local(4, [](comm::ProcessGroup& w) { check_norm(w, 4); });
}

TEST(GradNorm, ClipScale) {
  EXPECT_EQ(clip_scale(0.5, 1.0), 1.0f);
  EXPECT_NEAR(clip_scale(4.0, 1.0), 0.25f, 1e-6);
  EXPECT_EQ(clip_scale(100.0, 0.0), 1.0f);
  EXPECT_EQ(clip_scale(std::nan(""), 1.0), 1.0f);
}

TEST(GradSync, AveragesOverDataParallelRanksInBuckets) {
  comm::run_local(2, [](comm::ProcessGroup& world) {
    auto dp = world.new_subgroups_by_enumeration({{0, 1}}, "dp");
    std::vector<nn::Parameter> ps;
    for (int i = 0; i < 5; ++i)
      ps.push_back(param("p" + std::to_string(i), std::vector<float>(16, 0), true));
    std::vector<nn::Parameter*> ptrs;
    for (auto& p : ps) ptrs.push_back(&p);
    // 16 floats = 64 bytes per parameter: buckets of two parameters.
    GradSync sync(ptrs, dp, 128);
    EXPECT_EQ(sync.num_buckets(), 3);
    for (int step = 0; step < 2; ++step) {
      for (auto& p : ps) p.grad.fill(static_cast<float>(world.rank() + 1 + step));
      for (auto it = ptrs.rbegin(); it != ptrs.rend(); ++it) sync.mark_ready(*it);
      sync.finish();
      EXPECT_EQ(sync.issued_early(), 3);
      for (auto& p : ps) EXPECT_EQ(p.grad.item(7), 1.5f + step);
    }
    // Accumulation microbatches do not synchronize.
    sync.set_sync(false);
    for (auto& p : ps) p.grad.fill(static_cast<float>(world.rank()));
    for (auto* p : ptrs) sync.mark_ready(p);
    sync.finish();
    EXPECT_EQ(ps[0].grad.item(0), static_cast<float>(world.rank()));
  });
}

TEST(GradSync, SumsPartialGradientsOverTheirGroup) {
  comm::run_local(2, [](comm::ProcessGroup& world) {
    auto tp = world.new_subgroups_by_enumeration({{0, 1}}, "tp");
    nn::Parameter p = param("ln.weight", {0, 0, 0}, false);
    p.grad_sum_group = tp;
    GradSync sync({&p}, nullptr);
    p.grad.fill(static_cast<float>(world.rank() + 1));
    sync.finish();
    EXPECT_EQ(p.grad.to_vector(), (std::vector<float>{3, 3, 3}));
  });
}

// The partial sums of one group go as one coalesced all-reduce; buckets
// whose parameters were never marked ready go together at finish().
TEST(GradSync, CoalescesPartialSumsAndPendingBuckets) {
  comm::run_local(2, [](comm::ProcessGroup& world) {
    auto tp = world.new_subgroups_by_enumeration({{0, 1}}, "tp");
    auto dp = world.new_subgroups_by_enumeration({{0, 1}}, "dp");
    std::vector<nn::Parameter> ps;
    for (int i = 0; i < 3; ++i)
      ps.push_back(param("ln" + std::to_string(i), std::vector<float>(16, 0), false));
    std::vector<nn::Parameter*> ptrs;
    for (auto& p : ps) {
      p.grad_sum_group = tp;
      ptrs.push_back(&p);
    }
    GradSync sync(ptrs, dp, 64);  // one parameter per bucket
    ASSERT_EQ(sync.num_buckets(), 3);
    for (size_t i = 0; i < ps.size(); ++i)
      ps[i].grad.fill(static_cast<float>(world.rank() + 1 + static_cast<int>(i)));
    tp->reset_stats();
    dp->reset_stats();
    sync.finish();
    EXPECT_EQ(tp->stats().count(comm::OpKind::all_reduce), 1);
    EXPECT_EQ(dp->stats().count(comm::OpKind::all_reduce), 1);
    EXPECT_EQ(sync.issued_early(), 0);
    // DP average, then the sum over tp: 2 * (1.5 + i).
    for (size_t i = 0; i < ps.size(); ++i)
      EXPECT_EQ(ps[i].grad.to_vector(),
                std::vector<float>(16, 3.0f + 2.0f * static_cast<float>(i)));
  });
}

TEST(GradSync, UnknownParameterAndDoubleReadyAreErrors) {
  nn::Parameter p = param("p", {0}, false), q = param("q", {0}, false);
  GradSync sync({&p}, nullptr);
  EXPECT_THROW(sync.mark_ready(&q), Error);
  sync.mark_ready(&p);
  EXPECT_THROW(sync.mark_ready(&p), Error);
}

}  // namespace
}  // namespace weft::optim
