// The TP equivalence suite on the local backend: every case at TP 1, 2 and 4.
#include <gtest/gtest.h>

#include "tp_cases.h"
#include "weft/comm/local.h"

namespace weft::nn::testing {
namespace {

class TpLocal : public ::testing::TestWithParam<std::tuple<TpCase, int>> {};

TEST_P(TpLocal, MatchesTp1) {
  const auto& [c, tp] = GetParam();
  comm::run_local(tp, [&](comm::ProcessGroup& world) { c.run(world, tp); });
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TpLocal, ::testing::Combine(::testing::ValuesIn(tp_cases()), ::testing::Values(1, 2, 4)),
    [](const auto& p) {
      return std::get<0>(p.param).name + "_tp" + std::to_string(std::get<1>(p.param));
    });

}  // namespace
}  // namespace weft::nn::testing
