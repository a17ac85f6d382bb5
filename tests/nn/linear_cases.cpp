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

constexpr int64_t B = 4, T = 4, IN = 8, OUT = 12;

struct LinearCase {
  Parallel mode;
  bool gather_output = false;
  bool input_is_parallel = true;
};

void check_linear(comm::ProcessGroup& world, int tp_size, LinearCase lc, SequenceParallel sp) {
  comm::Grid grid(world, "tp-dp", {{"tp", tp_size}});
  auto tp = grid.group_ptr("tp");
  LinearConfig cfg{.name = "lin",
                   .in = IN,
                   .out = OUT,
                   .mode = lc.mode,
                   .gather_output = lc.gather_output,
                   .input_is_parallel = lc.input_is_parallel};
  Tensor x = random_tensor({B, T, IN}, 1);
  Tensor dy = random_tensor({B, T, OUT}, 2);

  LinearConfig ref_cfg = cfg;
  ref_cfg.mode = Parallel::none;
  ref_cfg.gather_output = false;
  Linear ref(host_ctx_of(nullptr, SequenceParallel::off, DType::f32, 7), ref_cfg);
  Ctx rctx;
  Tensor y_ref = ref.forward(rctx, x);
  Tensor dx_ref = ref.backward(rctx, dy);

  Linear lin(ctx_of(tp, sp, DType::f32, 7), cfg);
  Ctx ctx;
  const bool split_in = lc.mode == Parallel::row && lc.input_is_parallel;
  const bool split_out = lc.mode == Parallel::column && !lc.gather_output;
  auto features = [&](const Tensor& full, bool split) {
    return split ? parallel::slice_along(exec_of(full), full, -1, tp->size(), tp->rank()) : full;
  };
  // Under SP a row-parallel layer whose input is parallel sees every token
  // (the column layer before it gathered them); otherwise its own tokens.
  // Every token is in the residual stream's layout (sequence-major under seq SP).
  Tensor x_in = features(split_in ? in_layout(x, sp) : local_tokens(x, sp, *tp), split_in);
  Tensor y = lin.forward(ctx, x_in);
  Tensor y_expect = features(
      lc.mode == Parallel::column ? in_layout(y_ref, sp) : local_tokens(y_ref, sp, *tp), split_out);
  EXPECT_TRUE(close(y_expect, y, kF32, 1.0));
  Tensor dy_in = features(
      lc.mode == Parallel::column ? in_layout(dy, sp) : local_tokens(dy, sp, *tp), split_out);
  Tensor dx = lin.backward(ctx, dy_in);
  Tensor dx_expect =
      features(split_in ? in_layout(dx_ref, sp) : local_tokens(dx_ref, sp, *tp), split_in);
  EXPECT_TRUE(close(dx_expect, dx, kF32, 1.0));
  expect_same_parameters(lin, ref);
}

// Column then row, the Megatron MLP pattern without the activation: under SP
// the pair takes and returns token shards.
void check_linear_pair(comm::ProcessGroup& world, int tp_size, SequenceParallel sp) {
  comm::Grid grid(world, "tp-dp", {{"tp", tp_size}});
  auto tp = grid.group_ptr("tp");
  Tensor x = random_tensor({B, T, IN}, 3);
  Tensor dy = random_tensor({B, T, IN}, 4);
  Linear ref1(host_ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 1),
              {.name = "a", .in = IN, .out = OUT});
  Linear ref2(host_ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 1),
              {.name = "b", .in = OUT, .out = IN});
  Ctx rctx;
  Tensor y_ref = ref2.forward(rctx, ref1.forward(rctx, x));
  Tensor dx_ref = ref1.backward(rctx, ref2.backward(rctx, dy));

  Linear l1(ctx_of(tp, sp, DType::f32, 1),
            {.name = "a", .in = IN, .out = OUT, .mode = Parallel::column});
  Linear l2(ctx_of(tp, sp, DType::f32, 1),
            {.name = "b", .in = OUT, .out = IN, .mode = Parallel::row});
  Ctx ctx;
  Tensor y = l2.forward(ctx, l1.forward(ctx, local_tokens(x, sp, *tp)));
  EXPECT_TRUE(close(local_tokens(y_ref, sp, *tp), y, kF32, 1.0));
  Tensor dx = l1.backward(ctx, l2.backward(ctx, local_tokens(dy, sp, *tp)));
  EXPECT_TRUE(close(local_tokens(dx_ref, sp, *tp), dx, kF32, 1.0));
  expect_same_parameters(l1, ref1);
  expect_same_parameters(l2, ref2);
}

}  // namespace

std::vector<TpCase> linear_cases() {
  std::vector<TpCase> cases;
  const std::pair<const char*, SequenceParallel> sps[] = {{"", SequenceParallel::off},
                                                          {"_sp_seq", SequenceParallel::seq},
                                                          {"_sp_batch", SequenceParallel::batch}};
  const std::pair<const char*, LinearCase> linears[] = {
      {"linear_column", {Parallel::column}},
      {"linear_row", {Parallel::row}},
      {"linear_row_full_input", {Parallel::row, false, false}},
      {"linear_replicated", {Parallel::none}}};
  for (const auto& [sp_name, sp] : sps) {
    for (const auto& [name, lc] : linears) {
      cases.push_back({std::string(name) + sp_name,
                       [lc, sp](comm::ProcessGroup& w, int t) { check_linear(w, t, lc, sp); }});
    }
    cases.push_back({std::string("linear_pair") + sp_name,
                     [sp](comm::ProcessGroup& w, int t) { check_linear_pair(w, t, sp); }});
  }
  cases.push_back({"linear_column_gather_output", [](comm::ProcessGroup& w, int t) {
                     check_linear(w, t, {Parallel::column, true}, SequenceParallel::off);
                   }});
  return cases;
}

}  // namespace weft::nn::testing
