// Defaults that follow the preset (learning rate, warmup) and a global batch
// pinned across layouts.
#include <gtest/gtest.h>

#include "weft/train/config.h"

namespace weft::train {
namespace {

TrainConfig with(const io::Json& settings) {
  TrainConfig c;
  apply_settings(c, settings, "test");
  return c;
}

io::Json object(std::initializer_list<std::pair<const char*, io::Json>> items) {
  io::Json j = io::Json::object();
  for (const auto& [k, v] : items) j[k] = v;
  return j;
}

TEST(ConfigDefaults, LearningRateFollowsThePresetUnlessGiven) {
  EXPECT_DOUBLE_EQ(TrainConfig().lr_value(), 6e-3);
  EXPECT_DOUBLE_EQ(with(object({{"preset", "gpt2-124m"}})).lr_value(), 6e-4);
  EXPECT_DOUBLE_EQ(with(object({{"preset", "gpt2-124m"}})).min_lr_value(), 6e-5);
  // A given --lr wins, whichever layer names the preset later.
  TrainConfig c = with(object({{"lr", 1e-3}}));
  apply_settings(c, object({{"preset", "gpt2-124m"}}), "later");
  EXPECT_DOUBLE_EQ(c.lr_value(), 1e-3);
  EXPECT_TRUE(c.to_json().at("lr").is_number());
  EXPECT_TRUE(TrainConfig().to_json().at("lr").is_null());
}

TEST(ConfigDefaults, WarmupIsHalfAShortRunAndCappedByThePreset) {
  EXPECT_EQ(with(object({{"steps", 30}})).warmup_steps(), 15);
  EXPECT_EQ(with(object({{"steps", 800}})).warmup_steps(), 100);
  EXPECT_EQ(with(object({{"preset", "gpt2-124m"}, {"steps", 1000}})).warmup_steps(), 500);
  EXPECT_EQ(with(object({{"preset", "gpt2-124m"}, {"steps", 19000}})).warmup_steps(), 700);
  EXPECT_EQ(with(object({{"steps", 30}, {"warmup", 2}})).warmup_steps(), 2);
  EXPECT_EQ(with(object({{"steps", 30}, {"warmup", 0}})).warmup_steps(), 0);
}

TEST(ConfigDefaults, GlobalBatchPinsTheSequencesPerStep) {
  for (int dp : {1, 2, 4}) {
    TrainConfig c = with(object({{"global-batch", 16}, {"grad-accum", 2}, {"micro-batch", 3}}));
    apply_global_batch(c, dp);
    EXPECT_EQ(c.sequences_per_step(dp), 16) << "dp " << dp;
    EXPECT_EQ(c.micro_batch, 8 / dp);
  }
  TrainConfig odd = with(object({{"global-batch", 16}}));
  try {
    apply_global_batch(odd, 3);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "--global-batch 16 does not split evenly over dp 3 x --grad-accum 1: use a "
                 "multiple of 3, or another --grad-accum");
  }
  TrainConfig none;
  apply_global_batch(none, 4);
  EXPECT_EQ(none.micro_batch, TrainConfig().micro_batch);
}

}  // namespace
}  // namespace weft::train
