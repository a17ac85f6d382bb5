// The collective suite on the mpi backend: run under mpirun (ctest does it
// with `mpirun --oversubscribe -np 4`). Every rank runs every case; rank 0
// prints the gtest report, other ranks print their failures prefixed with
// their rank, and all ranks exit with the same status (../support/mpi_gtest.h).
#include <gtest/gtest.h>

#include <chrono>

#include "../support/mpi_gtest.h"
#include "collective_cases.h"
#include "weft/comm/mpi.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!weft::testing::require_mpirun(argv[0])) return 2;
  auto world = weft::comm::mpi_world();
  world->set_timeout(std::chrono::seconds(60));
  for (const auto& c : weft::comm::testing::collective_cases()) {
    if (!c.runs_on(world->size())) continue;
    weft::testing::register_test(
        "MpiCollectives", c.name, [w = world.get(), run = c.run] { run(*w); }, __FILE__, __LINE__);
  }
  return weft::testing::run_tests(*world);
}
