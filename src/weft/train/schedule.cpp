#include "weft/train/schedule.h"

#include <cmath>
#include <numbers>

#include "weft/core/error.h"

namespace weft::train {

void LrSchedule::validate() const {
  WEFT_CHECK(std::isfinite(lr) && lr > 0, "--lr {} must be a positive number", lr);
  WEFT_CHECK(std::isfinite(floor()) && floor() >= 0 && floor() <= lr,
             "the minimum learning rate {} must lie in [0, --lr {}]", floor(), lr);
  WEFT_CHECK(total >= 1, "--steps {} must be at least 1", total);
  WEFT_CHECK(warmup >= 0 && warmup <= total,
             "--warmup {} must lie in [0, --steps {}]; use a shorter warmup", warmup, total);
}

double LrSchedule::at(int64_t step) const {
  validate();
  WEFT_CHECK(step >= 0, "learning-rate schedule asked for step {}; steps count from 0", step);
  const double x = static_cast<double>(step + 1);
  const double w = static_cast<double>(warmup);
  const double t = static_cast<double>(total);
  const double m = floor();
  if (x <= w && w > 0) return lr * x / w;
  if (x > t) return m;
  const double progress = (x - w) / (t - w);
  return m + (lr - m) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace weft::train
