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
  // The ranks of one model replica: its TP, EP and GTP groups.
  const int model = cfg.tp * cfg.ep * cfg.gtp;
  std::string model_text = format("--tp {}", cfg.tp);
  if (cfg.ep > 1) model_text += format(" x --ep {}", cfg.ep);
  if (cfg.gtp > 1) model_text += format(" x --gtp {}", cfg.gtp);
  if (out.under_mpi) {
    const int world = comm::launcher_world_size();
    WEFT_CHECK(world <= 0 || world % model == 0,
               "mpirun started {} processes, not a multiple of {}: use mpirun -np {}", world,
               model_text, (world / model + 1) * model);
    WEFT_CHECK(world <= 0 || cfg.dp == 0 || cfg.dp * model == world,
               "{} x --dp {} needs {} processes, mpirun started {}: leave --dp out to infer it",
               model_text, cfg.dp, model * cfg.dp, world);
    out.dp = std::max(1, world / cfg.tp);
  } else {
    out.dp = (cfg.dp ? cfg.dp : 1) * cfg.ep * cfg.gtp;
  }
  out.local_ranks = model * (cfg.dp ? cfg.dp : 1);
  return out;
}

}  // namespace weft::train
