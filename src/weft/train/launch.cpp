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
  const bool gpu = Device::parse(cfg.device).is_cuda();
  WEFT_CHECK(cfg.backend != "nccl" || gpu,
             "--backend nccl moves GPU memory: add --device cuda, or use --backend mpi");
  WEFT_CHECK(!(gpu && out.under_mpi && cfg.backend == "mpi"),
             "--device {} under mpirun takes one GPU per process over NCCL: use --backend nccl "
             "(or leave --backend out)",
             cfg.device);
  if (gpu && (cfg.backend == "nccl" || (cfg.backend == "auto" && out.under_mpi))) {
    out.backend = "nccl";
  }
  WEFT_CHECK(out.backend != "nccl" || out.under_mpi || Device::parse(cfg.device).index == 0,
             "--backend nccl without mpirun runs one rank on cuda:0, not {}: pass --device cuda "
             "(or start it with mpirun, which gives each rank its GPU)",
             cfg.device);
  // The ranks of one model replica: its TP, CP, EP, GTP and pipeline groups.
  const int model = cfg.tp * cfg.cp * cfg.ep * cfg.gtp * cfg.pp;
  std::string model_text = format("--tp {}", cfg.tp);
  if (cfg.cp > 1) model_text += format(" x --cp {}", cfg.cp);
  if (cfg.ep > 1) model_text += format(" x --ep {}", cfg.ep);
  if (cfg.gtp > 1) model_text += format(" x --gtp {}", cfg.gtp);
  if (cfg.pp > 1) model_text += format(" x --pp {}", cfg.pp);
  if (out.under_mpi) {
    const int world = comm::launcher_world_size();
    WEFT_CHECK(world <= 0 || world % model == 0,
               "mpirun started {} processes, not a multiple of {}: use mpirun -np {}", world,
               model_text, (world / model + 1) * model);
    WEFT_CHECK(world <= 0 || cfg.dp == 0 || cfg.dp * model == world,
               "{} x --dp {} needs {} processes, mpirun started {}: leave --dp out to infer it",
               model_text, cfg.dp, model * cfg.dp, world);
    // The ranks reading different sequences (a cp group shares its own; the
    // stages of a pipeline one replica's).
    out.dp = std::max(1, world / (cfg.tp * cfg.cp * cfg.pp));
  } else {
    out.dp = (cfg.dp ? cfg.dp : 1) * cfg.ep * cfg.gtp;
  }
  out.local_ranks = model * (cfg.dp ? cfg.dp : 1);
  WEFT_CHECK(out.backend != "nccl" || out.under_mpi || out.local_ranks == 1,
             "--backend nccl runs one process per GPU, but {} x --dp {} asks for {} ranks in this "
             "process: start it with `mpirun -np {} weft train --device cuda ...`, or drop "
             "--backend nccl to run the ranks as threads sharing one GPU",
             model_text, cfg.dp ? cfg.dp : 1, out.local_ranks, out.local_ranks);
  return out;
}

}  // namespace weft::train
