// Generalized tensor parallelism on the mpi backend (gtp_cases.cpp): the GPT
// and the Llama at every layout of the world with GTP > 1 among tp 1/2 x gtp
// 2/4 (under `mpirun -np 8`: the 2 x 2 x 2 grid, tp 1 x gtp 2 x dp 4, tp 1 x
// gtp 4 x dp 2, tp 2 x gtp 4), SP off, seq and batch at TP 2, registered as
// GtpMpi.<gpt|llama>_tp<T>_gtp<G>_dp<D>_sp_<mode>.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "mpi_gtest.h"
#include "tp_cases.h"
#include "weft/comm/mpi.h"

int main(int argc, char** argv) {
  using weft::parallel::SequenceParallel;
  ::testing::InitGoogleTest(&argc, argv);
  if (!weft::testing::require_mpirun(argv[0])) return 2;
  auto world = weft::comm::mpi_world();
  world->set_timeout(std::chrono::seconds(60));
  for (int tp : {1, 2}) {
    for (int gtp : {2, 4}) {
      if (world->size() % (tp * gtp) != 0) continue;
      const int dp = world->size() / (tp * gtp);
      for (SequenceParallel sp :
           {SequenceParallel::off, SequenceParallel::seq, SequenceParallel::batch}) {
        if (tp == 1 && sp != SequenceParallel::off) continue;
        const std::string layout = "tp" + std::to_string(tp) + "_gtp" + std::to_string(gtp) +
                                   "_dp" + std::to_string(dp) + "_sp_" +
                                   weft::parallel::sequence_parallel_name(sp);
        for (bool llama : {false, true}) {
          weft::testing::register_test(
              "GtpMpi", (llama ? "llama_" : "gpt_") + layout,
              [w = world.get(), tp, gtp, sp, llama] {
                weft::nn::testing::check_gtp_gpt(*w, tp, gtp, sp, llama);
              },
              __FILE__, __LINE__);
        }
      }
    }
  }
  return weft::testing::run_tests(*world);
}
