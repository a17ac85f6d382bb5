// How a training run is launched: which backend its ranks run on and how many
// there are, from the options (--backend, --tp, --dp) and what the launcher
// announced. The launcher's environment is read by comm/world.h alone; this
// file turns what it reports into the run's layout, checked before MPI starts
// so that every process of a misconfigured job ends with the same error alone.
#pragma once

#include <string>

#include "weft/train/config.h"

namespace weft::train {

struct Launch {
  bool under_mpi = false;  // an MPI launcher started this process: one rank per process
  // The data-parallel size the run's global batch is computed for (before
  // the world starts), the ranks that see different data (ep · gtp · dp): the
  // launcher's world / tp under MPI, else --ep · --gtp · --dp (--dp 1 when auto).
  int dp = 1;
  // Ranks run as threads of this process on the local backend: tp · ep · gtp · dp.
  int local_ranks = 1;
  // The world's backend for comm::run_world: "nccl" for --device cuda under
  // mpirun (or --backend nccl), else "auto".
  std::string backend = "auto";
};

// The layout of `cfg`; a weft::Error naming the option to change when
// --backend contradicts how weft was started or mpirun started a world that
// --tp and --dp do not fit.
Launch plan_launch(const TrainConfig& cfg);

}  // namespace weft::train
