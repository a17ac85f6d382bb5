// Generation on a training job's model (what --sample-prompt runs): with the
// key/value cache at TP 2 x GTP 2 and with experts split over EP 2, and
// recomputing under sequence parallelism (where the cache does not run), the
// greedy ids equal the recomputing path's on every rank; a prompt that runs
// past the context (16 positions) takes both paths.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "trainer_harness.h"
#include "weft/infer/generate.h"
#include "weft/io/tokenizer.h"

namespace weft::train {
namespace {

TEST(GenerateInTraining, CachedIdsEqualRecomputingAtTrainingLayouts) {
  const io::Dataset data(test_text(), 16);
  TrainConfig gtp = tiny_config();
  gtp.tp = 2;
  gtp.gtp = 2;
  gtp.model.width = 24;  // pads every GTP shard
  TrainConfig moe = tiny_config();
  moe.model.moe_experts = 4;
  moe.ep = 2;
  TrainConfig sp = tiny_config();
  sp.tp = 2;
  sp.sp = nn::SequenceParallel::seq;
  const std::pair<const char*, TrainConfig> layouts[] = {
      {"tp 2 x gtp 2", gtp}, {"ep 2", moe}, {"tp 2, sp seq", sp}};
  const std::vector<int32_t> prompt = io::ByteTokenizer().encode("the q");
  for (const auto& [what, c] : layouts) {
    std::mutex mu;
    std::vector<std::vector<int32_t>> ids;
    comm::run_local(c.tp * c.ep * c.gtp, [&](comm::ProcessGroup& world) {
      set_num_threads(1);
      Trainer t(c, world, data);
      t.step();
      EXPECT_EQ(infer::cache_supported(t.model()), c.sp == nn::SequenceParallel::off) << what;
      infer::GenerateOptions o{.tokens = 20, .temperature = 0.0f};
      const std::vector<int32_t> cached = infer::generate(t.model(), prompt, o);
      o.cache = false;
      EXPECT_EQ(cached, infer::generate(t.model(), prompt, o)) << what;
      const std::lock_guard<std::mutex> lock(mu);
      ids.push_back(cached);
    });
    for (const auto& r : ids) EXPECT_EQ(r, ids.front()) << what << ": the ranks differ";
  }
}

}  // namespace
}  // namespace weft::train
