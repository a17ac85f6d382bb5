// Activation recomputation (--recompute selective|full, nn/recompute.h):
// the same kernels on the same inputs with the dropout draws replayed, so
// every step's loss, gradient norm and the final weights equal those of no
// recomputation bitwise -- with dropout, gradient accumulation, TP with
// sequence parallelism, GTP (whose weights are gathered again for the
// recomputed forward) and a delayed-scaling FP8 recipe (whose amaxes the
// recomputed forward must not record again). And the memory it saves: the
// measured activation peak of a step drops.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "trainer_harness.h"
#include "weft/core/memory.h"

namespace weft::train {
namespace {

class Recompute : public ::testing::Test {
 protected:
  Recompute() : data_(test_text(), 16) {}

  static TrainConfig config() {
    TrainConfig c = tiny_config();
    c.model.dropout = 0.1f;
    c.grad_accum = 2;
    c.micro_batch = 2;
    c.steps = 3;
    c.grad_clip = 0.5;
    return c;
  }

  // Every loss, gradient norm and weight bit-identical.
  static void expect_bitwise(const RunResult& a, const RunResult& b, const std::string& what) {
    ASSERT_EQ(a.losses.size(), b.losses.size()) << what;
    for (size_t i = 0; i < a.losses.size(); ++i) {
      EXPECT_EQ(a.losses[i], b.losses[i]) << what << ", step " << i + 1;
      EXPECT_EQ(a.grad_norms[i], b.grad_norms[i]) << what << ", grad norm, step " << i + 1;
    }
    EXPECT_EQ(a.val_loss, b.val_loss) << what;
    ASSERT_EQ(a.params.size(), b.params.size()) << what;
    for (const auto& [name, pa] : a.params) {
      EXPECT_EQ(pa.values, b.params.at(name).values) << what << ": " << name;
    }
  }

  // none, selective, full and full on the first layer only, on `world` ranks.
  void expect_all_modes_equal(TrainConfig c, int dp = 1) {
    c.model.recompute = nn::Recompute::none;
    const RunResult base = run(c, data_, dp);
    ASSERT_FALSE(base.losses.empty());
    for (const nn::Recompute mode : {nn::Recompute::selective, nn::Recompute::full}) {
      c.model.recompute = mode;
      c.model.recompute_layers = 0;
      expect_bitwise(base, run(c, data_, dp), nn::recompute_name(mode));
    }
    c.model.recompute = nn::Recompute::full;
    c.model.recompute_layers = 1;
    expect_bitwise(base, run(c, data_, dp), "full, first layer");
  }

  io::Dataset data_;
};

TEST_F(Recompute, DropoutAndAccumulationBitwise) { expect_all_modes_equal(config()); }

// Sequences over 128 positions: the attention kernel keeps no probabilities,
// only its output and the log-sum-exp.
TEST_F(Recompute, LongSequencesBitwise) {
  TrainConfig c = config();
  c.model.seq = 160;
  c.grad_accum = 1;
  c.steps = 2;
  const io::Dataset long_data(test_text(), 160);
  c.model.recompute = nn::Recompute::none;
  const RunResult base = run(c, long_data, 1);
  for (const nn::Recompute mode : {nn::Recompute::selective, nn::Recompute::full}) {
    c.model.recompute = mode;
    expect_bitwise(base, run(c, long_data, 1), nn::recompute_name(mode));
  }
}

TEST_F(Recompute, TensorParallelSequenceParallelBitwise) {
  TrainConfig c = config();
  c.tp = 2;
  c.sp = nn::SequenceParallel::seq;
  expect_all_modes_equal(c);
}

TEST_F(Recompute, DataParallelBitwise) { expect_all_modes_equal(config(), 2); }

// GTP: the recomputed forward gathers its weights again along the prefetch
// chain (the chain records those gathers in the backward's order).
TEST_F(Recompute, GeneralizedTensorParallelBitwise) {
  TrainConfig c = config();
  c.model.width = 24;
  c.gtp = 2;
  expect_all_modes_equal(c);
}

// Delayed scaling: the scales come from the amax histories, which a
// recomputed forward must leave as they are (any change shows in the
// next steps' losses).
TEST_F(Recompute, DelayedScalingFp8Bitwise) {
  TrainConfig c = config();
  c.precision.recipe = parallel::Recipe::fp8_delayed;
  c.precision.amax_history = 4;
  c.steps = 4;
  expect_all_modes_equal(c);
}

// The other quantized recipes compute their scales from the tensors (the
// same in the recomputed forward); nvfp4's stochastic rounding draws in the
// backward only.
TEST_F(Recompute, CurrentAndBlockScalingBitwise) {
  for (const parallel::Recipe r : {parallel::Recipe::fp8_current, parallel::Recipe::fp8_block,
                                   parallel::Recipe::mxfp8, parallel::Recipe::nvfp4}) {
    SCOPED_TRACE(parallel::recipe_name(r));
    TrainConfig c = config();
    c.precision.recipe = r;
    c.steps = 2;
    expect_all_modes_equal(c);
  }
}

TEST_F(Recompute, Bf16Bitwise) {
  TrainConfig c = config();
  c.precision.recipe = parallel::Recipe::bf16;
  expect_all_modes_equal(c);
}

// The peak of activation bytes in a training step, measured by rank 0's
// memory tracker (after a first step has made every workspace).
int64_t activation_peak(const TrainConfig& c, const io::Dataset& data) {
  int64_t peak = 0;
  std::mutex mu;
  comm::run_local(c.tp, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    Trainer t(c, world, data);
    t.step();
    MemoryTracker& tracker = MemoryTracker::current();
    tracker.reset_peaks();
    t.step();
    const int64_t p = tracker.tag(Device::cpu(), MemoryTag::activations).peak;
    std::lock_guard<std::mutex> lock(mu);
    if (world.rank() == 0) peak = p;
  });
  return peak;
}

TEST_F(Recompute, ActivationPeakDrops) {
  TrainConfig c = tiny_config();
  c.model.layers = 6;
  c.model.width = 64;
  c.model.seq = 64;
  c.micro_batch = 4;
  c.model.dropout = 0.1f;
  const io::Dataset data(test_text(), 64);
  c.model.recompute = nn::Recompute::none;
  const int64_t none = activation_peak(c, data);
  c.model.recompute = nn::Recompute::selective;
  const int64_t selective = activation_peak(c, data);
  c.model.recompute = nn::Recompute::full;
  const int64_t full = activation_peak(c, data);
  c.model.recompute_layers = 3;
  const int64_t half = activation_peak(c, data);
  EXPECT_LT(selective, none);
  EXPECT_LT(full, none / 2) << "none " << none << ", full " << full;
  EXPECT_LT(full, half);
  EXPECT_LT(half, none);
}

}  // namespace
}  // namespace weft::train
