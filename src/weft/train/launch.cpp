#include "weft/train/launch.h"

#include <algorithm>

#include "weft/comm/world.h"

namespace weft::train {

Launch plan_launch(const TrainConfig& cfg) {
  Launch out;
  out.under_mpi = comm::launched_by_mpi();
  WEFT_CHECK(cfg.backend != "mpi" || out.under_mpi,
             "--backend mpi runs one process per rank: start it with `mpirun -np N weft train "
             "...`");
  WEFT_CHECK(cfg.backend != "local" || !out.under_mpi,
             "--backend local runs the ranks as threads of one process: start weft without "
             "mpirun, or use --backend mpi");
  if (out.under_mpi) {
    const int world = comm::launcher_world_size();
    WEFT_CHECK(world <= 0 || world % cfg.tp == 0,
               "mpirun started {} processes, not a multiple of --tp {}: use mpirun -np {}", world,
               cfg.tp, (world / cfg.tp + 1) * cfg.tp);
    WEFT_CHECK(
        world <= 0 || cfg.dp == 0 || cfg.dp * cfg.tp == world,
        "--tp {} x --dp {} needs {} processes, mpirun started {}: leave --dp out to infer it",
        cfg.tp, cfg.dp, cfg.tp * cfg.dp, world);
    out.dp = std::max(1, world / cfg.tp);
  } else {
    out.dp = cfg.dp ? cfg.dp : 1;
  }
  out.local_ranks = cfg.tp * (cfg.dp ? cfg.dp : 1);
  return out;
}

}  // namespace weft::train
