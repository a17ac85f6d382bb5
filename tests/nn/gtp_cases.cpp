// Generalized tensor parallelism on the whole GPT (tp_cases.h): GTP at a TP
// size, with and without sequence parallelism, over the data-parallel ranks
// the world leaves, equals the model at TP=1 without GTP — the loss, the
// logits, every parameter and every gradient (through its ShardSpec, row
// padding included) and the global gradient norm. The ranks of a gtp group
// take different samples (as data-parallel ranks do); their shards'
// gradients are the group's mean, and the gradients are then averaged over
// the data groups here as the trainer's gradient sync does. Shapes are
// unaligned on purpose: vocabulary 257 and width 24 pad every shard.
#include <gtest/gtest.h>

#include "contexts.h"
#include "testing.h"
#include "tp_cases.h"
#include "weft/comm/grid.h"
#include "weft/nn/gpt.h"
#include "weft/optim/grad_norm.h"
#include "weft/parallel/gtp/runtime.h"
#include "weft/parallel/mappings.h"

namespace weft::nn::testing {

using weft::testing::close;
using weft::testing::kF32;

GptConfig unaligned_config(int tp) {
  GptConfig c;
  c.vocab = 257;
  c.vocab_pad = tp;  // 257 or 258 rows: no multiple of 16
  c.seq = 8;
  c.layers = 2;
  c.width = 24;
  c.heads = 4;
  return c;
}

parallel::ContextPtr gtp_context(std::shared_ptr<comm::ProcessGroup> tp,
                                 std::shared_ptr<comm::ProcessGroup> gtp, SequenceParallel sp,
                                 parallel::gtp::Options options) {
  auto c = std::make_shared<parallel::ParallelContext>(*ctx_of(std::move(tp), sp, DType::f32, 5));
  c->workspace = std::make_shared<parallel::Workspace>();
  parallel::gtp::enable(*c, std::move(gtp), std::move(options));
  return c;
}

// unaligned_config's sizes as a Llama: 4 query heads over 2 KV heads, SwiGLU,
// rotary positions, no biases, an untied head (a second vocabulary-row weight).
GptConfig unaligned_llama_config(int tp) {
  GptConfig c = unaligned_config(tp);
  c.kv_heads = 2;
  c.hidden = 20;
  c.norm = NormKind::rms;
  c.mlp = MlpKind::swiglu;
  c.positions = PositionKind::rotary;
  c.bias = false;
  c.tied_head = false;
  return c;
}

void check_gtp_gpt(comm::ProcessGroup& world, int tp_size, int gtp_size, SequenceParallel sp,
                   bool llama) {
  comm::Grid grid(world, "tp-gtp-dp", {{"tp", tp_size}, {"gtp", gtp_size}});
  auto tp = grid.group_ptr("tp");
  auto gtp = grid.group_ptr("gtp");
  auto dp = grid.group_ptr("dp");
  // The replicas that see different data: gtp and dp ranks together.
  auto data =
      world.new_subgroups_by_enumeration(grid.layout().groups_across({"gtp", "dp"}), "gtp-dp");
  const GptConfig cfg = llama ? unaligned_llama_config(tp_size) : unaligned_config(tp_size);
  const int64_t part = 2, B = part * data->size(), T = 8;
  Tensor tokens = random_tokens({B, T}, cfg.vocab, 1),
         targets = random_tokens({B, T}, cfg.vocab, 2);

  Gpt ref(ctx_of(nullptr, SequenceParallel::off, DType::f32, 5), cfg);
  Ctx rctx;
  const float ref_loss = ref.forward_loss(rctx, tokens, targets);
  ref.backward_loss(rctx);
  Ctx eval_ref(nullptr, false);
  const Tensor ref_logits = ref.forward(eval_ref, tokens);

  Gpt model(gtp_context(tp, gtp, sp), cfg);
  // This replica's samples; under batch SP each TP rank its share of them.
  Tensor my_tokens = parallel::slice_along(exec_of(tokens), tokens, 0, data->size(), data->rank());
  Tensor my_targets =
      parallel::slice_along(exec_of(targets), targets, 0, data->size(), data->rank());
  const Tensor part_logits = parallel::slice_along(
      exec_of(ref_logits),
      parallel::slice_along(exec_of(ref_logits), ref_logits, 0, data->size(), data->rank()), -1,
      tp->size(), tp->rank());
  if (sp == SequenceParallel::batch) {
    my_tokens = parallel::slice_along(exec_of(my_tokens), my_tokens, 0, tp->size(), tp->rank());
    my_targets = parallel::slice_along(exec_of(my_targets), my_targets, 0, tp->size(), tp->rank());
  }
  for (int step = 0; step < 2; ++step) {  // the first records the chain, the second prefetches
    SCOPED_TRACE(::testing::Message() << "pass " << step);
    model.zero_grad();
    Ctx ctx;
    Tensor loss =
        Tensor::from({1}, std::vector<float>{model.forward_loss(ctx, my_tokens, my_targets)});
    data->all_reduce(loss, comm::ReduceOp::avg).wait();
    EXPECT_NEAR(loss.item(0), ref_loss, 1e-5 * std::abs(ref_loss));
    model.backward_loss(ctx);
    model.context()->gtp_runtime->chain.drain();
    std::vector<Parameter*> mine = model.parameters(), theirs = ref.parameters();
    ASSERT_EQ(mine.size(), theirs.size());
    int sharded = 0;
    for (size_t i = 0; i < mine.size(); ++i) {
      Parameter& p = *mine[i];
      SCOPED_TRACE(p.name);
      ASSERT_EQ(p.name, theirs[i]->name);
      EXPECT_EQ(p.value.to_vector(), shard_of(p.spec, theirs[i]->value).to_vector());
      Tensor g = p.grad.clone();
      if (p.grad_sum_group) g = parallel::all_reduce_sum(exec_of(g), *p.grad_sum_group, g);
      // As the trainer's gradient sync: shards (averaged over gtp by their
      // reduce-scatter) over dp, every other gradient over gtp and dp.
      if (p.spec.rows_split()) {
        ++sharded;
        EXPECT_EQ(p.spec.row_group, "gtp");
      }
      (p.spec.rows_split() ? dp : data)->all_reduce(g, comm::ReduceOp::avg).wait();
      p.grad.copy_from(g);  // for the norm below
      EXPECT_TRUE(close(shard_of(p.spec, theirs[i]->grad), g, kF32, 1.0));
    }
    // wte, an untied head's weight and every Linear weight
    EXPECT_EQ(sharded, (cfg.tied_head ? 1 : 2) + 4 * cfg.layers);
    const double norm = optim::global_grad_norm(mine, {{"tp", tp}, {"gtp", gtp}, {"dp", dp}});
    const double ref_norm = optim::global_grad_norm(theirs, {});
    EXPECT_NEAR(norm, ref_norm, 1e-5 * ref_norm);
  }
  // Evaluation: this rank's vocabulary slice of its samples' logits.
  if (sp != SequenceParallel::batch) {
    Ctx eval(nullptr, false);
    EXPECT_TRUE(close(part_logits, model.forward(eval, my_tokens), kF32, 1.0));
  }
  EXPECT_TRUE(model.context()->gtp_runtime->chain.recorded());
}

}  // namespace weft::nn::testing
