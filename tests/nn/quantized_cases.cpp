// TP equivalence of the quantized recipes: a column-parallel then a
// row-parallel Linear (the MLP pattern) at TP 2 and 4 against the same pair
// at TP 1 under the same recipe, for two optimizer steps (delayed scaling
// updates its scales in between). Tolerance: rel 1e-4 / abs 1e-5 — every
// rank quantizes with the scales of the TP=1 run, so the quantized operands
// are the same; what differs is the summation order of the GEMMs and of the
// reductions (outputs of the row-parallel layer are all-reduced), which can
// move a value across an FP8 rounding boundary only with a probability too
// small to matter at these sizes. nvfp4 runs with stochastic rounding off
// here: its draws are indexed by element, and a TP shard's elements are not
// the TP=1 tensor's (the Hadamard signs are shared and stay on).
#include <gtest/gtest.h>

#include "contexts.h"
#include "testing.h"
#include "tp_cases.h"
#include "tp_harness.h"
#include "weft/comm/grid.h"
#include "weft/nn/linear.h"
#include "weft/parallel/mappings.h"

namespace weft::nn::testing {

namespace {

constexpr int64_t B = 4, T = 16, IN = 64, OUT = 128;
constexpr weft::testing::Tolerance kQuantized{1e-4, 1e-5};

parallel::ContextPtr context(std::shared_ptr<comm::ProcessGroup> tp, SequenceParallel sp,
                             parallel::Recipe recipe) {
  parallel::Precision p = parallel::Precision::of(recipe);
  p.amax_history = 4;
  p.stochastic_rounding = false;
  return parallel::make_context(std::move(tp), sp, p, 3);
}

void check_pair(comm::ProcessGroup& world, int tp_size, parallel::Recipe recipe,
                SequenceParallel sp) {
  comm::Grid grid(world, "tp-dp", {{"tp", tp_size}});
  auto tp = grid.group_ptr("tp");
  auto ref_ctx = context(nullptr, SequenceParallel::off, recipe);
  Linear ref1(ref_ctx, {.name = "a", .in = IN, .out = OUT});
  Linear ref2(ref_ctx, {.name = "b", .in = OUT, .out = IN});
  auto ctx_tp = context(tp, sp, recipe);
  Linear l1(ctx_tp, {.name = "a", .in = IN, .out = OUT, .mode = Parallel::column});
  Linear l2(ctx_tp, {.name = "b", .in = OUT, .out = IN, .mode = Parallel::row});
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE(step);
    Tensor x = random_tensor({B, T, IN}, 3 + static_cast<uint32_t>(step), -2.0f, 2.0f);
    Tensor dy = random_tensor({B, T, IN}, 5 + static_cast<uint32_t>(step), -0.1f, 0.1f);
    // The reference sees the tokens in the TP run's order: block scales
    // down the columns (and NVFP4's Hadamard transform) group consecutive tokens.
    x = in_layout(x, sp);
    dy = in_layout(dy, sp);
    auto mine = [&](const Tensor& full) {
      return sp == SequenceParallel::off
                 ? full
                 : parallel::slice_along(exec_of(full), full, 0, tp->size(), tp->rank());
    };
    Ctx rctx;
    Tensor y_ref = ref2.forward(rctx, ref1.forward(rctx, x));
    Tensor dx_ref = ref1.backward(rctx, ref2.backward(rctx, dy));
    Ctx ctx;
    Tensor y = l2.forward(ctx, l1.forward(ctx, mine(x)));
    EXPECT_TRUE(close(mine(y_ref), y, kQuantized, 1.0));
    Tensor dx = l1.backward(ctx, l2.backward(ctx, mine(dy)));
    EXPECT_TRUE(close(mine(dx_ref), dx, kQuantized, 1.0));
    for (auto [lin, ref] : {std::pair<Linear*, Linear*>{&l1, &ref1}, {&l2, &ref2}}) {
      for (Parameter* p : {&lin->weight(), lin->bias()}) {
        SCOPED_TRACE(p->name);
        const Parameter* r = p == &lin->weight() ? &ref->weight() : ref->bias();
        Tensor g = p->grad;
        if (p->grad_sum_group) g = parallel::all_reduce_sum(exec_of(g), *p->grad_sum_group, g);
        EXPECT_TRUE(close(shard_of(p->spec, r->grad), g, kQuantized, 1.0));
        p->grad.zero();
      }
      ref->weight().grad.zero();
      ref->bias()->grad.zero();
    }
    ref_ctx->scaling->end_step(ref_ctx->precision, nullptr);
    ctx_tp->scaling->end_step(ctx_tp->precision, tp.get());
  }
  // Delayed scaling: after the reduction every rank holds the TP=1 scales.
  const parallel::ScalingRegistry& reg = *ctx_tp->scaling;
  const parallel::ScalingRegistry& ref = *ref_ctx->scaling;
  ASSERT_EQ(reg.size(), ref.size());
  EXPECT_EQ(reg.size(), recipe == parallel::Recipe::fp8_delayed ? 6 : 0);
  for (int i = 0; i < reg.size(); ++i) {
    SCOPED_TRACE(reg.name(i));
    EXPECT_EQ(reg.state(i).scale, ref.state(i).scale);
    EXPECT_NE(reg.state(i).scale, 1.0f);
    EXPECT_EQ(reg.state(i).amax_history, ref.state(i).amax_history);
    Tensor s = Tensor::from({1}, std::vector<float>{reg.state(i).scale});
    Tensor all = Tensor::empty({tp->size()});
    tp->all_gather(all, s).wait();
    for (float v : all.to_vector()) EXPECT_EQ(v, reg.state(i).scale);
  }
}

}  // namespace

std::vector<TpCase> quantized_cases() {
  std::vector<TpCase> cases;
  for (parallel::Recipe r : parallel::kQuantizedRecipes) {
    for (const auto& [sp_name, sp] :
         {std::pair{"", SequenceParallel::off}, std::pair{"_sp_seq", SequenceParallel::seq}}) {
      std::string name = std::string("quantized_pair_") + parallel::recipe_name(r) + sp_name;
      for (char& c : name) c = c == '-' ? '_' : c;
      cases.push_back({name, [r, sp](comm::ProcessGroup& w, int t) { check_pair(w, t, r, sp); }});
    }
  }
  return cases;
}

}  // namespace weft::nn::testing
