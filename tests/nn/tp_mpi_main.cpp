// The TP-equivalence suite on the mpi backend: every TpCase at TP 2 (a
// tp 2 x dp 2 grid on 4 ranks) and TP 4, registered as TpMpi.<case>_tp<T>.
// Run under mpirun (ctest: `mpirun --oversubscribe -np 4`, one test per TP
// size through --gtest_filter); see ../support/mpi_gtest.h for the reporting.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "mpi_gtest.h"
#include "tp_cases.h"
#include "weft/comm/mpi.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!weft::testing::require_mpirun(argv[0])) return 2;
  auto world = weft::comm::mpi_world();
  world->set_timeout(std::chrono::seconds(60));
  for (int tp : {2, 4}) {
    if (world->size() % tp != 0) {
      if (world->rank() == 0) {
        std::fprintf(stderr, "world size %d is not divisible by tp %d: skipping TP %d\n",
                     world->size(), tp, tp);
      }
      continue;
    }
    for (const auto& c : weft::nn::testing::tp_cases()) {
      weft::testing::register_test(
          "TpMpi", c.name + "_tp" + std::to_string(tp),
          [w = world.get(), run = c.run, tp] { run(*w, tp); }, __FILE__, __LINE__);
    }
  }
  return weft::testing::run_tests(*world);
}
