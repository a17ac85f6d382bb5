// A job in which rank 3 fails: `throw` (it raises an error) or `absent` (it
// never joins the next collective). Run under mpirun with 4 ranks; the job
// must end with a non-zero status, and the output must name what went wrong,
// within seconds rather than hang. ctest checks both (expect_failure.cmake).
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "weft/comm/world.h"
#include "weft/core/error.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "throw" && mode != "absent") {
    std::fprintf(stderr, "usage: %s throw|absent (under mpirun -np 4)\n", argv[0]);
    return 2;
  }
  weft::comm::run_world(4, [&](weft::comm::ProcessGroup& world) {
    world.set_timeout(std::chrono::seconds(2));
    weft::Tensor t = weft::Tensor::zeros({16});
    world.all_reduce(t).wait();
    if (world.rank() == 3) {
      if (mode == "throw") WEFT_FAIL("rank 3 fails on purpose");
      std::this_thread::sleep_for(std::chrono::seconds(120));
      return;
    }
    world.all_reduce(t).wait();
  });
  return 0;
}
