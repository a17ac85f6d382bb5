// Training a GPT with tensor and data parallelism, step by step: the sequence
// `weft train` runs, in plain C++. 4 ranks: threads of this process, or one
// process each under `mpirun -np 4 train_gpt`.
//
//   train_gpt [STEPS]
#include <cstdio>
#include <cstdlib>

#include "weft/comm/grid.h"
#include "weft/comm/world.h"
#include "weft/io/data.h"
#include "weft/nn/gpt.h"
#include "weft/optim/adamw.h"
#include "weft/optim/grad_norm.h"
#include "weft/optim/grad_sync.h"
#include "weft/parallel/rng.h"
#include "weft/train/schedule.h"

using namespace weft;

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 100;
  const int tp = 2, dp = 2, batch = 8;  // batch: sequences per DP rank
  io::Dataset data(io::default_corpus(), /*seq_len=*/64);
  comm::run_world(tp * dp, [&](comm::ProcessGroup& world) {
    // 1. Process groups: TP ranks are contiguous ([0,1] [2,3]), DP groups [0,2] [1,3].
    comm::Grid grid(world, "tp-dp", {{"tp", tp}, {"dp", dp}});
    // 2. Random streams: dropout inside TP regions differs per shard.
    parallel::RngTracker rng(/*seed=*/1337, grid.rank_in("tp"));
    // 3. The model, sharded over the TP group (heads and vocabulary split).
    nn::GptConfig cfg = nn::gpt_preset("tiny");
    cfg.layers = 2;
    cfg.seq = 64;
    //    How it runs (groups, SP, precision, seed) is its parallel context.
    nn::Gpt model(parallel::make_context(grid.group_ptr("tp")), cfg);
    // 4. Gradients averaged over the DP group in buckets, during backward.
    std::vector<nn::Parameter*> params = model.parameters();
    optim::GradSync sync(params, grid.group_ptr("dp"));
    optim::AdamW adamw(params, {.weight_decay = 0.1f});
    train::LrSchedule lr{.lr = 2e-3, .warmup = steps / 10, .total = steps};
    // 5. The loop: every rank of a TP group reads the same rows, each DP rank its own.
    io::Sampler sampler(data, /*seed=*/1337, batch * dp);
    const io::BatchSlice slice{.dp_rank = grid.rank_in("dp"), .dp_size = dp};
    for (int step = 0; step < steps; ++step) {
      io::Batch b = sampler.next_batch(step, /*micro_step=*/0, slice);
      nn::Ctx ctx(&rng);
      const float loss = model.forward_loss(ctx, b.inputs, b.targets);
      model.backward_loss(ctx, 1.0f, [&](const std::vector<nn::Parameter*>& ready) {
        for (nn::Parameter* p : ready) sync.mark_ready(p);  // starts each full bucket's all-reduce
      });
      sync.finish();
      const double norm = optim::global_grad_norm(
          params, {{"tp", grid.group_ptr("tp")}, {"dp", grid.group_ptr("dp")}});
      adamw.step(static_cast<float>(lr.at(step)), optim::clip_scale(norm, 1.0));
      model.zero_grad();
      if (world.rank() == 0 && (step % 10 == 0 || step == steps - 1)) {
        std::printf("step %3d  loss %.4f (DP rank 0's rows)  grad norm %.3f\n", step, loss, norm);
      }
    }
  });
  return 0;
}
