// The memory model against the memory tracker: for layouts of every
// dimension this build runs (tp, sp seq/batch, dp, gtp, ep/MoE, micro-batch,
// grad-accum, bf16 and f32, the quantized recipes, the tiny / llama-tiny / moe-tiny presets, short
// and long sequences), the predicted peak of the largest rank within 10% of
// the largest rank's measured peak over two training steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "weft/comm/world.h"
#include "weft/core/memory.h"
#include "weft/io/json.h"
#include "weft/plan/memory_model.h"
#include "weft/train/plan_layout.h"
#include "weft/train/trainer.h"

namespace weft::plan {
namespace {

io::Dataset random_tokens(const train::TrainConfig& cfg) {
  io::TokenData d;
  d.source = "random tokens";
  const int64_t n = std::max<int64_t>(64 * (cfg.model.seq + 1), 1 << 15);
  uint64_t x = 88172645463325252ull;
  for (int64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    d.tokens.push_back(static_cast<int32_t>(x % static_cast<uint64_t>(cfg.model.vocab)));
  }
  return io::Dataset(std::move(d), cfg.model.seq, 0.1);
}

struct Case {
  std::string name;
  std::string settings;  // a JSON object of `weft train` keys
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

train::TrainConfig config_of(const Case& c) {
  train::TrainConfig cfg;
  train::apply_settings(cfg, io::parse_json(c.settings, c.name), c.name);
  cfg.steps = 2;
  cfg.sample_tokens = 0;
  cfg.eval_every = 0;
  return cfg;
}

// The largest rank's peak over two steps (rank 0's peak per tag printed).
int64_t measured_peak(const train::TrainConfig& cfg) {
  const io::Dataset data = random_tokens(cfg);
  const int world = cfg.tp * cfg.ep * cfg.gtp * std::max(cfg.dp, 1);
  std::mutex mu;
  int64_t peak = 0;
  comm::run_world(world, [&](comm::ProcessGroup& g) {
    train::Trainer t(cfg, g, data);
    t.step();
    t.step();
    const std::vector<int64_t> peaks = t.peak_memory();
    std::lock_guard<std::mutex> lock(mu);
    if (g.rank() == 0) {
      std::string tags;
      for (int i = 0; i < kNumMemoryTags; ++i) {
        const auto tag = static_cast<MemoryTag>(i);
        tags += format(" {} {}", memory_tag_name(tag),
                       MemoryTracker::current().tag(Device::cpu(), tag).peak);
      }
      std::printf("rank 0 tag peaks:%s\n", tags.c_str());
    }
    peak = std::max(peak, *std::max_element(peaks.begin(), peaks.end()));
  });
  return peak;
}

class MemoryMeasured : public ::testing::TestWithParam<Case> {};

TEST_P(MemoryMeasured, PredictionWithinTenPercentOfTrackerPeak) {
  const train::TrainConfig cfg = config_of(GetParam());
  const MemoryModel model(train::plan_workload(cfg));
  const MemoryBreakdown b = model.peak(train::plan_layout(cfg));
  const int64_t measured = measured_peak(cfg);
  const double ratio = static_cast<double>(b.total()) / static_cast<double>(measured);
  std::printf(
      "%-28s measured %10lld predicted %10lld (%.3f)  params %lld grads %lld optim %lld act %lld "
      "ws %lld comm %lld cache %lld\n",
      GetParam().name.c_str(), static_cast<long long>(measured), static_cast<long long>(b.total()),
      ratio, static_cast<long long>(b.parameters), static_cast<long long>(b.gradients),
      static_cast<long long>(b.optimizer), static_cast<long long>(b.activations),
      static_cast<long long>(b.workspaces), static_cast<long long>(b.comm_buffers),
      static_cast<long long>(b.weight_cache));
  EXPECT_GT(ratio, 0.9);
  EXPECT_LT(ratio, 1.1);
}

const Case kCases[] = {
    {"tiny_tp1", R"({"preset":"tiny","tp":1,"micro-batch":8,"seq":64})"},
    {"tiny_tp2", R"({"preset":"tiny","tp":2,"micro-batch":8,"seq":64})"},
    {"tiny_tp2_sp_seq", R"({"preset":"tiny","tp":2,"sp":"seq","micro-batch":8,"seq":64})"},
    {"tiny_tp2_sp_batch", R"({"preset":"tiny","tp":2,"sp":"batch","micro-batch":8,"seq":64})"},
    {"tiny_dp2", R"({"preset":"tiny","tp":1,"dp":2,"micro-batch":8,"seq":64})"},
    {"tiny_gtp2", R"({"preset":"tiny","tp":1,"gtp":2,"micro-batch":8,"seq":64})"},
    {"tiny_accum2", R"({"preset":"tiny","tp":2,"micro-batch":4,"grad-accum":2,"seq":64})"},
    {"tiny_bf16", R"({"preset":"tiny","tp":2,"dtype":"bf16","micro-batch":8,"seq":64})"},
    {"tiny_seq256", R"({"preset":"tiny","tp":1,"micro-batch":4,"seq":256})"},
    {"tiny_seq256_mb8", R"({"preset":"tiny","tp":2,"micro-batch":8,"seq":256})"},
    {"tiny_dropout", R"({"preset":"tiny","tp":1,"dropout":0.1,"micro-batch":8,"seq":64})"},
    {"llama_tiny_tp2", R"({"preset":"llama-tiny","tp":2,"micro-batch":8,"seq":128})"},
    {"llama_tiny_bf16_dp2",
     R"({"preset":"llama-tiny","tp":1,"dp":2,"dtype":"bf16","micro-batch":8,"seq":128})"},
    {"llama_tiny_seq512", R"({"preset":"llama-tiny","tp":2,"micro-batch":2,"seq":512})"},
    {"llama_tiny_gtp4_accum4",
     R"({"preset":"llama-tiny","tp":1,"gtp":4,"micro-batch":1,"grad-accum":4,"seq":512})"},
    {"llama_tiny_tp2_dp2_sp",
     R"({"preset":"llama-tiny","tp":2,"dp":2,"sp":"seq","micro-batch":8,"seq":512})"},
    {"tiny_fp8_delayed",
     R"({"preset":"tiny","tp":2,"precision":"fp8-delayed","micro-batch":8,"seq":64})"},
    {"llama_tiny_mxfp8_dp2",
     R"({"preset":"llama-tiny","tp":1,"dp":2,"precision":"mxfp8","micro-batch":4,"seq":128})"},
    {"moe_tiny_ep2", R"({"preset":"moe-tiny","tp":1,"ep":2,"micro-batch":8,"seq":64})"},
    {"moe_tiny_tp2", R"({"preset":"moe-tiny","tp":2,"micro-batch":8,"seq":64})"},
};

INSTANTIATE_TEST_SUITE_P(Layouts, MemoryMeasured, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

}  // namespace
}  // namespace weft::plan
