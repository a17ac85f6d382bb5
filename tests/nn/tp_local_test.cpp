// The TP equivalence suite on the local backend: every case at TP 2 and 4.
// Each case compares the TP run with the same module at TP=1 (tp = nullptr),
// computed on every rank; a TP 1 instance would compare TP=1 with itself (a
// size-1 group takes the same no-communication paths), so there is none, as in
// tp_mpi_main.cpp. Size-1 groups are covered by Collectives.NoneAtTp1.
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
    Cases, TpLocal, ::testing::Combine(::testing::ValuesIn(tp_cases()), ::testing::Values(2, 4)),
    [](const auto& p) {
      return std::get<0>(p.param).name + "_tp" + std::to_string(std::get<1>(p.param));
    });

}  // namespace
}  // namespace weft::nn::testing
