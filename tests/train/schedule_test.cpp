#include "weft/train/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>

#include "weft/core/error.h"

namespace weft::train {
namespace {

TEST(LrSchedule, WarmupRisesLinearlyToThePeak) {
  LrSchedule s{.lr = 1e-3, .warmup = 10, .total = 100};
  for (int64_t step = 0; step < 10; ++step) {
    EXPECT_DOUBLE_EQ(s.at(step), 1e-3 * static_cast<double>(step + 1) / 10);
  }
  EXPECT_DOUBLE_EQ(s.at(9), 1e-3);  // the last warmup step runs at the peak
}

TEST(LrSchedule, CosineDecaysToTheFloorAtTheLastStep) {
  LrSchedule s{.lr = 1e-3, .warmup = 10, .total = 100};
  EXPECT_DOUBLE_EQ(s.floor(), 1e-4);  // default lr / 10
  EXPECT_NEAR(s.at(99), 1e-4, 1e-18);
  EXPECT_DOUBLE_EQ(s.at(100), 1e-4);  // past the end: the floor
  EXPECT_DOUBLE_EQ(s.at(1000), 1e-4);
  // Halfway through the decay (x = 55): the mean of peak and floor.
  EXPECT_NEAR(s.at(54), (1e-3 + 1e-4) / 2, 1e-15);
  // The formula at one interior point.
  const double x = 31, expected = 1e-4 + 0.9e-3 * 0.5 * (1 + std::cos(std::numbers::pi * 21 / 90));
  EXPECT_NEAR(s.at(static_cast<int64_t>(x) - 1), expected, 1e-15);
}

TEST(LrSchedule, IsMonotone) {
  LrSchedule s{.lr = 6e-4, .warmup = 37, .total = 500, .min_lr = 0.0};
  for (int64_t step = 1; step < 37; ++step) EXPECT_GT(s.at(step), s.at(step - 1)) << step;
  for (int64_t step = 37; step < 520; ++step) EXPECT_LE(s.at(step), s.at(step - 1)) << step;
  for (int64_t step = 37; step < 499; ++step) EXPECT_LT(s.at(step), s.at(step - 1)) << step;
  EXPECT_NEAR(s.at(499), 0.0, 1e-20);
}

TEST(LrSchedule, NoWarmupStartsNearThePeak) {
  LrSchedule s{.lr = 1.0, .warmup = 0, .total = 4, .min_lr = 0.0};
  // f(x) = ½(1 + cos(πx/4)) at x = 1..4.
  EXPECT_NEAR(s.at(0), 0.5 * (1 + std::cos(std::numbers::pi / 4)), 1e-15);
  EXPECT_NEAR(s.at(1), 0.5, 1e-15);
  EXPECT_NEAR(s.at(3), 0.0, 1e-15);
}

TEST(LrSchedule, WarmupOverTheWholeRunNeverDecays) {
  LrSchedule s{.lr = 2.0, .warmup = 4, .total = 4};
  EXPECT_DOUBLE_EQ(s.at(0), 0.5);
  EXPECT_DOUBLE_EQ(s.at(3), 2.0);
}

TEST(LrSchedule, RejectsBadSettingsNamingTheOption) {
  auto message = [](LrSchedule s) {
    try {
      s.validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({.lr = 1e-3, .warmup = 200, .total = 100}),
            "--warmup 200 must lie in [0, --steps 100]; use a shorter warmup");
  EXPECT_NE(message({.lr = 0, .warmup = 0, .total = 10}).find("--lr"), std::string::npos);
  EXPECT_NE(message({.lr = 1e-3, .warmup = 0, .total = 0}).find("--steps"), std::string::npos);
  EXPECT_NE(message({.lr = 1e-3, .warmup = 0, .total = 10, .min_lr = 1.0}).find("minimum"),
            std::string::npos);
  EXPECT_THROW((LrSchedule{.lr = 1e-3, .warmup = 0, .total = 10}.at(-1)), Error);
}

}  // namespace
}  // namespace weft::train
