// The step's first micro-batch writes the Linear layers' weight gradients
// instead of adding to them (PassContext::first_microbatch), and the trainer
// zeroes only the other gradients: a step after which every gradient so
// marked holds garbage trains exactly as one after zeroed gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

#include "trainer_harness.h"

namespace weft::train {
namespace {

void expect_written_gradients_need_no_zeroing(TrainConfig c, int dp) {
  const io::Dataset data(test_text(), 16);
  const RunResult clean = run(c, data, dp);
  std::vector<double> losses;
  int64_t marked = 0;
  std::mutex mu;
  comm::run_local(c.tp * dp, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    Trainer t(c, world, data);
    std::vector<double> mine;
    int64_t count = 0;
    while (t.steps_done() < c.steps) {
      mine.push_back(t.step().loss);
      count = 0;
      for (nn::Parameter* p : t.model().parameters()) {
        if (!p->grad_overwritten) continue;
        ++count;
        p->grad.fill(std::numeric_limits<float>::quiet_NaN());
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    if (world.rank() == 0) {
      losses = mine;
      marked = count;
    }
  });
  // qkv, proj, fc1 and fc2 of every layer (the LM head's weight is the
  // embedding's: its gradient is zeroed, the embedding adds to it).
  EXPECT_EQ(marked, 4 * c.model.layers);
  EXPECT_EQ(losses, clean.losses);
}

TEST(FirstMicrobatch, WritesWeightGradientsThatNeedNoZeroing) {
  TrainConfig c = tiny_config();
  c.grad_accum = 2;
  c.micro_batch = 2;
  c.model.dropout = 0.1f;
  expect_written_gradients_need_no_zeroing(c, 1);
  c.tp = 2;
  c.sp = nn::SequenceParallel::seq;
  expect_written_gradients_need_no_zeroing(c, 1);
  c.tp = 1;
  c.sp = nn::SequenceParallel::off;
  c.distributed_optimizer = true;
  expect_written_gradients_need_no_zeroing(c, 2);
}

}  // namespace
}  // namespace weft::train
