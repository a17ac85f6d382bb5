// PhaseClock on the CPU: host clock readings between marks; misuse is named.
#include "weft/core/phase_clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "weft/core/error.h"

namespace weft {
namespace {

TEST(PhaseClock, SecondsBetweenMarksOnTheCpu) {
  PhaseClock clock(ExecContext::host());
  const int a = clock.mark();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int b = clock.mark();
  const int c = clock.mark();
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  EXPECT_GE(clock.seconds(a, b), 0.015);
  EXPECT_GE(clock.seconds(b, c), 0.0);
  EXPECT_EQ(clock.seconds(a, a), 0.0);
  EXPECT_GE(clock.seconds(a, c), clock.seconds(a, b));
  EXPECT_THROW(clock.seconds(b, a), Error);
  EXPECT_THROW(clock.seconds(0, 3), Error);
  EXPECT_THROW(clock.seconds(-1, 0), Error);
}

}  // namespace
}  // namespace weft
