// Generalized tensor parallelism on the whole GPT, local backend
// (gtp_cases.cpp): GTP 2 and 4 at TP 1 and 2, SP off/seq/batch, DP 1 and 2
// equal TP=1 without GTP; a partition plan leaves weights out; one call
// shards a built model; the quantized recipes (weights gathered quantized)
// at GTP 2 and 4 and at TP 2 x GTP 2 train as TP=1 without GTP.
#include <gtest/gtest.h>

#include "contexts.h"
#include "testing.h"
#include "tp_cases.h"
#include "weft/comm/grid.h"
#include "weft/comm/local.h"
#include "weft/kernels/activation.h"
#include "weft/nn/gpt.h"
#include "weft/nn/grouped_linear.h"
#include "weft/nn/weight_sources.h"
#include "weft/optim/grad_norm.h"
#include "weft/parallel/gtp/runtime.h"
#include "weft/parallel/gtp/sharded_weight_source.h"
#include "weft/parallel/mappings.h"

namespace weft::nn {
namespace {

using testing::gtp_context;
using testing::unaligned_config;

struct Layout {
  int tp, gtp;
  SequenceParallel sp;
  int dp = 1;
};

class GtpGpt : public ::testing::TestWithParam<Layout> {};

TEST_P(GtpGpt, EqualsTp1WithoutGtp) {
  const Layout l = GetParam();
  comm::run_local(l.tp * l.gtp * l.dp, [&](comm::ProcessGroup& world) {
    testing::check_gtp_gpt(world, l.tp, l.gtp, l.sp);
  });
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, GtpGpt,
    ::testing::Values(Layout{1, 2, SequenceParallel::off}, Layout{1, 4, SequenceParallel::off},
                      Layout{2, 2, SequenceParallel::off}, Layout{2, 2, SequenceParallel::seq},
                      Layout{2, 2, SequenceParallel::batch}, Layout{2, 4, SequenceParallel::off},
                      Layout{2, 4, SequenceParallel::seq}, Layout{1, 2, SequenceParallel::off, 2}),
    [](const auto& p) {
      return "tp" + std::to_string(p.param.tp) + "_gtp" + std::to_string(p.param.gtp) + "_dp" +
             std::to_string(p.param.dp) + "_sp_" + sequence_parallel_name(p.param.sp);
    });

// The Llama architecture (GQA, SwiGLU, rotary positions, an untied head) under
// GTP, with TP and SP, and with data parallelism beside it.
class GtpLlama : public ::testing::TestWithParam<Layout> {};

TEST_P(GtpLlama, EqualsTp1WithoutGtp) {
  const Layout l = GetParam();
  comm::run_local(l.tp * l.gtp * l.dp, [&](comm::ProcessGroup& world) {
    testing::check_gtp_gpt(world, l.tp, l.gtp, l.sp, true);
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, GtpLlama,
                         ::testing::Values(Layout{1, 2, SequenceParallel::off},
                                           Layout{2, 2, SequenceParallel::seq},
                                           Layout{2, 2, SequenceParallel::batch},
                                           Layout{1, 2, SequenceParallel::off, 2}),
                         [](const auto& p) {
                           return "tp" + std::to_string(p.param.tp) + "_gtp" +
                                  std::to_string(p.param.gtp) + "_dp" + std::to_string(p.param.dp) +
                                  "_sp_" + sequence_parallel_name(p.param.sp);
                         });

// A partition plan leaves weights out of GTP: they stay whole, replicated
// over the gtp group. One call puts a model built without GTP under it.
TEST(GtpGpt, PlanLeavesWeightsOutAndOneCallShardsAModel) {
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    comm::Grid grid(world, "tp-gtp-dp", {{"tp", 1}, {"gtp", 2}});
    const PartitionPlan plan = PartitionPlan::parse("wte=replicate,h.*.mlp=replicate");
    parallel::gtp::Options options{
        .shards = [plan](const std::string& name) { return plan.partitioned(name); }};
    auto model = std::make_unique<Gpt>(ctx_of(nullptr, SequenceParallel::off, DType::f32, 5),
                                       unaligned_config(1));
    const auto find = [&](const std::string& name) {
      for (Parameter* p : model->parameters()) {
        if (p->name == name) return p;
      }
      return static_cast<Parameter*>(nullptr);
    };
    const std::vector<float> qkv = find("h.0.attn.qkv.weight")->value.to_vector();
    set_generalized_tensor_parallel_group(
        model, gtp_context(nullptr, grid.group_ptr("gtp"), SequenceParallel::off, options));
    for (Parameter* p : model->parameters()) {
      SCOPED_TRACE(p->name);
      const bool weight = p->name.ends_with(".weight") &&
                          p->name.find("ln_") == std::string::npos && p->name != "wpe.weight";
      const bool left_out = p->name == "wte.weight" || p->name.find(".mlp.") != std::string::npos;
      EXPECT_EQ(p->spec.rows_split(), weight && !left_out);
      const bool replicated =
          std::find(p->spec.replicated_over.begin(), p->spec.replicated_over.end(), "gtp") !=
          p->spec.replicated_over.end();
      EXPECT_EQ(replicated, !p->spec.rows_split());
    }
    // This rank's rows of the weight the model had.
    const Parameter& sharded = *find("h.0.attn.qkv.weight");
    const std::vector<float> mine = unpadded(sharded.spec, sharded.value).to_vector();
    EXPECT_EQ(mine, std::vector<float>(
                        qkv.begin() + sharded.spec.row_offset * 24,
                        qkv.begin() + (sharded.spec.row_offset + sharded.spec.row_length) * 24));
    EXPECT_THROW(set_generalized_tensor_parallel_group(model, ctx_of(nullptr)), Error);
  });
}

}  // namespace
}  // namespace weft::nn

namespace weft::nn {
namespace {

// GTP N with a quantized recipe (weights gathered quantized along the
// prefetch chain, quantized once per step) trains as TP 1 without GTP with
// the same recipe: every gtp rank given the whole batch, the losses of two
// steps (SGD between them, which bumps the weights' versions, and delayed
// scaling's end_step, which moves the scales) agree within 1e-5 relative
// (the gradient's reduce-scatter averages in another order). At TP 2 x GTP 2
// the TP slices are sharded over gtp and every amax is reduced over tp and
// gtp. There the model's Linear slices align to the recipes' blocks (width
// 64, MLP 128: a row-parallel slice's 32 or 64 columns and a column-parallel
// slice's rows hold whole 16x16 and 1x32 blocks), so that TP 2 quantizes as
// TP 1 does — at width 24 NVFP4's blocks of a 12-column slice are not the
// whole weight's — and NVFP4 runs with stochastic rounding off (its draws
// are indexed by element, and a TP slice's elements are not the whole
// tensor's). The qkv slice's 96 rows are still padded under MXFP8 (to 128).
GptConfig block_aligned_config(int tp) {
  GptConfig c = unaligned_config(tp);
  c.width = 64;
  c.hidden = 128;
  return c;
}

struct QuantizedLayout {
  parallel::Recipe recipe;
  int tp, gtp;
};

class GtpQuantized : public ::testing::TestWithParam<QuantizedLayout> {};

TEST_P(GtpQuantized, TrainsAsTp1WithoutGtp) {
  const QuantizedLayout l = GetParam();
  parallel::Precision precision = parallel::Precision::of(l.recipe);
  precision.stochastic_rounding = l.tp == 1;
  const GptConfig cfg = l.tp == 1 ? unaligned_config(1) : block_aligned_config(l.tp);
  const Tensor tokens = testing::random_tokens({2, 8}, cfg.vocab, 1),
               targets = testing::random_tokens({2, 8}, cfg.vocab, 2);
  // Two optimizer steps of two microbatches each (the second reuses the
  // step's quantized shards); the step's loss is the first microbatch's.
  auto train = [&](Gpt& m, comm::ProcessGroup* amax_group, std::vector<float>& losses) {
    for (int step = 0; step < 2; ++step) {
      m.zero_grad();
      for (int micro = 0; micro < 2; ++micro) {
        Ctx ctx;
        ctx.set_reuse_weight_casts(true);
        const float loss = m.forward_loss(ctx, tokens, targets);
        if (micro == 0) losses.push_back(loss);
        m.backward_loss(ctx, 0.5f);
        if (m.context()->gtp_runtime) m.context()->gtp_runtime->chain.drain();
      }
      for (Parameter* p : m.parameters()) {
        kernels::axpy(m.context()->exec, -0.1f, p->grad, p->value);
        ++p->version;
      }
      m.context()->scaling->end_step(m.context()->precision, amax_group);
    }
  };
  std::vector<float> ref_losses;
  Gpt ref(parallel::make_context(nullptr, SequenceParallel::off, precision, 5), cfg);
  train(ref, nullptr, ref_losses);
  comm::run_local(l.tp * l.gtp, [&](comm::ProcessGroup& world) {
    comm::Grid grid(world, "tp-gtp-dp", {{"tp", l.tp}, {"gtp", l.gtp}});
    auto c = std::make_shared<parallel::ParallelContext>(
        *parallel::make_context(grid.group_ptr("tp"), SequenceParallel::off, precision, 5));
    c->workspace = std::make_shared<parallel::Workspace>();
    c->scaling = std::make_shared<parallel::ScalingRegistry>();
    parallel::gtp::enable(*c, grid.group_ptr("gtp"), {});
    Gpt model(c, cfg);
    std::vector<float> losses;
    train(model, &world, losses);  // the world is tp x gtp here
    ASSERT_EQ(losses.size(), ref_losses.size());
    for (size_t i = 0; i < losses.size(); ++i) {
      EXPECT_NEAR(losses[i], ref_losses[i], 1e-5 * std::abs(ref_losses[i])) << "step " << i;
    }
    EXPECT_GT(model.context()->gtp_runtime->chain.stats().prefetched, 0);
  });
}

INSTANTIATE_TEST_SUITE_P(
    Recipes, GtpQuantized, ::testing::ValuesIn([] {
      std::vector<QuantizedLayout> out;
      for (parallel::Recipe r : parallel::kQuantizedRecipes) {
        for (auto [tp, gtp] : {std::pair{1, 2}, std::pair{1, 4}, std::pair{2, 2}}) {
          out.push_back({r, tp, gtp});
        }
      }
      return out;
    }()),
    [](const auto& p) {
      std::string name = std::string(parallel::recipe_name(p.param.recipe)) + "_tp" +
                         std::to_string(p.param.tp) + "_gtp" + std::to_string(p.param.gtp);
      for (char& ch : name) ch = ch == '-' ? '_' : ch;
      return name;
    });

// A GroupedLinear's experts under GTP: batched (the default), one all-gather
// per forward and per backward and one reduce-scatter per pass bring and
// reduce all of its experts; unbatched, one each per expert. Both compute
// the same outputs and gradients, bit for bit, in f32, bf16 and fp8 (each
// expert's shard quantized by its own quantizer).
TEST(GtpGroupedLinear, BatchedIsOneCollectivePerUseAndEqualsUnbatched) {
  constexpr int64_t E = 4, in = 24, out = 40;
  const std::vector<int64_t> counts{5, 0, 3, 9};
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    auto gtp = world.new_subgroups_by_enumeration({{0, 1}}, "gtp");
    for (const parallel::Recipe recipe :
         {parallel::Recipe::f32, parallel::Recipe::bf16, parallel::Recipe::fp8_current}) {
      SCOPED_TRACE(parallel::recipe_name(recipe));
      std::vector<std::vector<float>> results[2];
      for (const bool batched : {false, true}) {
        SCOPED_TRACE(batched ? "batched" : "one expert at a time");
        auto c = std::make_shared<parallel::ParallelContext>(*ctx_of(nullptr));
        c->precision = parallel::Precision::of(recipe);
        parallel::gtp::enable(*c, gtp, {.batch_experts = batched});
        GroupedLinear g(c, {.name = "m", .experts = E, .in = in, .out = out});
        EXPECT_EQ(g.batched(), batched);
        const DType dt = c->compute();
        for (int pass = 0; pass < 3; ++pass) {
          const Tensor x = on_test_device(
              weft::testing::random_tensor({17, in}, 10 * pass + world.rank(), -1, 1, dt));
          const Tensor dy = on_test_device(
              weft::testing::random_tensor({17, out}, 20 * pass + world.rank(), -1, 1, dt));
          const comm::CommStats before = gtp->stats();
          Ctx ctx;
          results[batched].push_back(g.forward(ctx, x, counts).to_vector());
          results[batched].push_back(g.backward(ctx, dy).to_vector());
          const comm::CommStats after = gtp->stats();
          EXPECT_EQ(after.count(comm::OpKind::all_gather) - before.count(comm::OpKind::all_gather),
                    batched ? 2 : 2 * E);
          EXPECT_EQ(after.count(comm::OpKind::reduce_scatter) -
                        before.count(comm::OpKind::reduce_scatter),
                    batched ? 1 : E);
        }
        c->gtp_runtime->chain.drain();
        for (int64_t e = 0; e < E; ++e) results[batched].push_back(g.weight(e).grad.to_vector());
      }
      EXPECT_EQ(results[1], results[0]);
    }
  });
}

}  // namespace
}  // namespace weft::nn
