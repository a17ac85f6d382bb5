// The distributed optimizer (--distributed-optimizer, optim/
// distributed_optimizer.h): the same training as the replicated AdamW --
// per-step losses and gradient norms within 1e-6 relative, the weights at
// the harness's tolerance -- at dp 2 with dropout, with TP and sequence
// parallelism, llama-tiny at tp 2 x dp 2, GTP, EP, gradient accumulation,
// a quantized recipe and replicated key/value heads; checkpoints that
// reshard between dp sizes with and without it; its optimizer state at
// dp 2 about half the replicated one's; dp 1 refused.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "testing.h"
#include "trainer_harness.h"
#include "weft/core/memory.h"
#include "weft/train/config_keys.h"

namespace weft::train {
namespace {

class DistributedOptimizer : public ::testing::Test {
 protected:
  DistributedOptimizer() : data_(test_text(), 16) {}

  static TrainConfig config() {
    TrainConfig c = tiny_config();
    c.model.dropout = 0.1f;
    c.grad_clip = 0.5;    // clips: the sharded norm must be the whole one
    c.bucket_mb = 0.004;  // several buckets
    return c;
  }

  // Losses and norms within 1e-6 relative; weights as the harness compares them.
  void expect_same_training(TrainConfig c, int dp, const std::string& what) {
    c.distributed_optimizer = false;
    const RunResult replicated = run(c, data_, dp);
    c.distributed_optimizer = true;
    const RunResult sharded = run(c, data_, dp);
    ASSERT_EQ(replicated.losses.size(), sharded.losses.size()) << what;
    for (size_t i = 0; i < replicated.losses.size(); ++i) {
      EXPECT_NEAR(sharded.losses[i], replicated.losses[i], 1e-6 * std::abs(replicated.losses[i]))
          << what << ", step " << i + 1;
      EXPECT_NEAR(sharded.grad_norms[i], replicated.grad_norms[i],
                  1e-6 * std::abs(replicated.grad_norms[i]))
          << what << ", grad norm, step " << i + 1;
    }
    expect_close(replicated, sharded, *c.lr);
  }

  io::Dataset data_;
};

TEST_F(DistributedOptimizer, DataParallelWithDropout) {
  expect_same_training(config(), 2, "dp 2");
  expect_same_training(config(), 4, "dp 4");
}

TEST_F(DistributedOptimizer, GradientAccumulation) {
  TrainConfig c = config();
  c.grad_accum = 2;
  c.micro_batch = 2;
  expect_same_training(c, 2, "dp 2, 2 micro-batches");
}

TEST_F(DistributedOptimizer, TensorAndSequenceParallel) {
  TrainConfig c = config();
  c.tp = 2;
  c.sp = nn::SequenceParallel::seq;
  expect_same_training(c, 2, "tp 2 x dp 2, sp seq");
  c.sp = nn::SequenceParallel::batch;
  expect_same_training(c, 2, "tp 2 x dp 2, sp batch");
}

TEST_F(DistributedOptimizer, LlamaTinyTensorParallel) {
  TrainConfig c = config();
  detail::apply_preset(c, "llama-tiny");
  c.lr = 1e-3;
  c.model.layers = 2;
  c.model.seq = 16;
  c.model.dropout = 0.1f;
  c.tp = 2;
  expect_same_training(c, 2, "llama-tiny tp 2 x dp 2");
  // Key/value heads replicated over the TP ranks (their common rows summed
  // over the share group within each shard).
  c.model.kv_heads = 1;
  expect_same_training(c, 2, "llama-tiny tp 2 x dp 2, one kv head");
}

TEST_F(DistributedOptimizer, GeneralizedTensorParallel) {
  TrainConfig c = config();
  c.model.width = 24;
  c.gtp = 2;
  expect_same_training(c, 2, "gtp 2 x dp 2");
  // gtp 2 at dp 1: the replicated weights shard over the gtp ranks.
  expect_same_training(c, 1, "gtp 2");
}

TEST_F(DistributedOptimizer, ExpertParallel) {
  TrainConfig c = config();
  detail::apply_preset(c, "moe-tiny");
  c.lr = 1e-3;
  c.model.layers = 2;
  c.model.width = 32;
  c.model.seq = 16;
  c.model.hidden = 64;
  c.model.dropout = 0.0f;
  c.ep = 2;
  expect_same_training(c, 2, "ep 2 x dp 2");
}

TEST_F(DistributedOptimizer, PrecisionRecipes) {
  for (const parallel::Recipe r :
       {parallel::Recipe::bf16, parallel::Recipe::fp8_delayed, parallel::Recipe::mxfp8}) {
    TrainConfig c = config();
    c.precision.recipe = r;
    expect_same_training(c, 2, format("{}, dp 2", parallel::recipe_name(r)));
  }
}

// Trains `steps` steps from `from` (a checkpoint, or none), saves to `to`
// when given, and returns the losses.
std::vector<double> train_steps(TrainConfig c, const io::Dataset& data, int dp, int steps,
                                const std::string& from, const std::string& to) {
  c.resume = from;
  std::vector<double> losses;
  std::mutex mu;
  comm::run_local(c.tp * dp, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    Trainer t(c, world, data);
    std::vector<double> mine;
    for (int i = 0; i < steps; ++i) mine.push_back(t.step().loss);
    if (!to.empty()) t.save(to);
    std::lock_guard<std::mutex> lock(mu);
    if (world.rank() == 0) losses = mine;
  });
  return losses;
}

void expect_near(const std::vector<double>& a, const std::vector<double>& b, double rel,
                 const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], rel * std::abs(b[i])) << what << ", step " << i + 1;
  }
}

// Saved with and without the flag at dp 2, resumed at dp 1, 2 and 4 with
// and without it: the next steps continue the run (the moments carried over
// show in them). The same global batch at every dp, no dropout (another
// world re-seeds the streams).
TEST_F(DistributedOptimizer, CheckpointsReshardAcrossDpAndFlag) {
  const weft::testing::TempDir tmp;
  TrainConfig c = config();
  c.steps = 6;
  c.micro_batch = 4;
  // At another world the random streams are seeded anew: no dropout here.
  c.model.dropout = 0.0f;
  auto at = [&](int dp, bool flag) {
    TrainConfig d = c;
    d.micro_batch = c.micro_batch * 2 / dp;
    d.distributed_optimizer = flag;
    return d;
  };
  for (const bool saved_flag : {true, false}) {
    const std::string dir = tmp.path(saved_flag ? "sharded" : "replicated");
    const int saved_dp = saved_flag ? 2 : 1;
    train_steps(at(saved_dp, saved_flag), data_, saved_dp, 3, "", dir);
    const std::vector<double> straight =
        train_steps(at(saved_dp, saved_flag), data_, saved_dp, 3, dir, "");
    for (const int dp : {1, 2, 4}) {
      for (const bool flag : {false, true}) {
        if (flag && dp == 1) continue;
        const std::string what =
            format("saved at dp {} {}, resumed at dp {} {}", saved_dp,
                   saved_flag ? "sharded" : "replicated", dp, flag ? "sharded" : "replicated");
        expect_near(train_steps(at(dp, flag), data_, dp, 3, dir, ""), straight, 1e-5, what);
      }
    }
  }
}

// Resumed at the same layout: bitwise.
TEST_F(DistributedOptimizer, ResumeIsBitwise) {
  const weft::testing::TempDir tmp;
  const std::string dir = tmp.path("ckpt");
  TrainConfig c = config();
  c.steps = 6;
  c.distributed_optimizer = true;
  const std::vector<double> all = train_steps(c, data_, 2, 6, "", "");
  const std::vector<double> first = train_steps(c, data_, 2, 3, "", dir);
  std::vector<double> resumed = train_steps(c, data_, 2, 3, dir, "");
  resumed.insert(resumed.begin(), first.begin(), first.end());
  EXPECT_EQ(resumed, all);
}

// Rank 0's optimizer bytes (the memory tracker's optimizer tag) after a step.
int64_t optimizer_bytes(const TrainConfig& c, const io::Dataset& data, int dp) {
  int64_t bytes = 0;
  std::mutex mu;
  comm::run_local(c.tp * dp, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    Trainer t(c, world, data);
    t.step();
    const int64_t mine = MemoryTracker::current().tag(Device::cpu(), MemoryTag::optimizer).live;
    std::lock_guard<std::mutex> lock(mu);
    if (world.rank() == 0) bytes = mine;
  });
  return bytes;
}

TEST_F(DistributedOptimizer, HalvesTheOptimizerStateAtDp2) {
  TrainConfig c = config();
  c.model.width = 64;
  const int64_t replicated = optimizer_bytes(c, data_, 2);
  c.distributed_optimizer = true;
  const int64_t sharded = optimizer_bytes(c, data_, 2);
  EXPECT_GT(sharded, 0);
  EXPECT_LE(static_cast<double>(sharded), 0.55 * static_cast<double>(replicated))
      << "sharded " << sharded << ", replicated " << replicated;
}

TEST_F(DistributedOptimizer, RefusedAtDp1) {
  TrainConfig c = config();
  c.distributed_optimizer = true;
  c.dp = 1;
  try {
    validate(c);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--distributed-optimizer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft::train
