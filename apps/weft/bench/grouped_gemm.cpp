#include "grouped_gemm.h"

#include <algorithm>
#include <vector>

#include "timing.h"
#include "weft/kernels/gemm.h"
#include "weft/nn/grouped_linear.h"

namespace weft::bench {

GroupedTiming time_grouped_fc1(DType dtype, int64_t tokens, int64_t width, int64_t experts,
                               int rounds, double min_time) {
  WEFT_CHECK(experts >= 1 && tokens % experts == 0,
             "--experts {} must divide --tokens {}: each expert takes tokens / experts rows",
             experts, tokens);
  const ExecContext& ec = ExecContext::host();
  const int64_t hidden = 4 * width;
  auto pc = parallel::make_context(nullptr, parallel::SequenceParallel::off,
                                   parallel::Precision::of(dtype));
  nn::GroupedLinear grouped(pc, {.name = "fc1", .experts = experts, .in = width, .out = hidden});
  const std::vector<int64_t> counts(static_cast<size_t>(experts), tokens / experts);
  Tensor x = ec.empty({tokens, width}, dtype), dy = ec.empty({tokens, hidden}, dtype);
  x.fill(0.01f);
  dy.fill(0.02f);
  // As the trainer runs it: the passes of an optimizer step reuse the
  // experts' weight casts, made once per step (timed apart, below).
  auto grouped_call = [&] {
    nn::Ctx ctx;
    ctx.set_reuse_weight_casts(true);
    grouped.forward(ctx, x, counts);
    grouped.backward(ctx, dy);
  };
  // The step's weight casts: every expert's f32 weight to the GEMM input
  // type, as after an optimizer step (nothing under f32).
  auto cast_call = [&] {
    nn::Ctx ctx;
    for (int64_t e = 0; e < grouped.local_experts(); ++e) grouped.source(e).weight_for_forward(ctx);
  };
  // The dense layer: the same three GEMMs over all rows at once.
  Tensor w = ec.empty({hidden, width}, dtype), y = ec.empty({tokens, hidden}, dtype),
         dx = ec.empty({tokens, width}, dtype), dw = ec.zeros({hidden, width}, DType::f32);
  w.fill(0.03f);
  auto dense_call = [&] {
    kernels::gemm(ec, x, w, y, {.trans_b = true});
    kernels::gemm(ec, dy, w, dx);
    kernels::gemm(ec, dy, x, dw, {.trans_a = true, .accumulate = true});
  };
  grouped_call();
  dense_call();
  const double once = seconds_per_call(grouped_call, 1);
  const int iters = std::max(1, static_cast<int>(min_time / std::max(once, 1e-9)));
  const auto samples = alternate(rounds, {[&] { return seconds_per_call(grouped_call, iters); },
                                          [&] { return seconds_per_call(dense_call, iters); },
                                          [&] { return seconds_per_call(cast_call, iters); }});
  return {.grouped = best(samples[0]),
          .dense = best(samples[1]),
          .cast = dtype == DType::f32 ? 0.0 : best(samples[2]),
          .flops = 3 * 2.0 * static_cast<double>(tokens) * static_cast<double>(width) *
                   static_cast<double>(hidden)};
}

}  // namespace weft::bench
