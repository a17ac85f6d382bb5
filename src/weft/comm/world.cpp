#include "weft/comm/world.h"

#include <cstdlib>
#include <exception>
#include <string_view>

#include "weft/comm/hybrid.h"
#include "weft/comm/local.h"
#if WEFT_HAVE_NCCL
#include "weft/comm/cuda/nccl.h"
#endif
#include "weft/comm/mpi.h"
#include "weft/core/error.h"

namespace weft::comm {

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    const char* s = std::getenv(v);
    if (s && *s) return true;
  }
  return false;
}

int launcher_world_size() {
  if (!launched_by_mpi()) return 0;
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    if (const char* s = std::getenv(v); s && *s) return std::atoi(s);
  }
  return 0;
}

void check_launcher() {
  if (launched_by_mpi()) return;
  const char* world = std::getenv("WORLD_SIZE");
  if (!world || !*world || std::string_view(world) == "1") return;
  const char* rank = std::getenv("RANK");
  WEFT_FAIL(
      "this process was started torchrun-style (WORLD_SIZE={}, RANK={}) without an MPI "
      "launcher, and weft joins ranks through MPI only: start the job as `mpirun -np {} weft "
      "...` (Open MPI), or unset WORLD_SIZE and RANK to run it in one process with its ranks as "
      "threads (--tp/--dp)",
      world, rank ? rank : "unset", world);
}

std::shared_ptr<ProcessGroup> init_world() {
  check_launcher();
  if (launched_by_mpi()) return mpi_world();
  return local_world_of_one();
}

#if !WEFT_HAVE_NCCL
namespace {
[[noreturn]] void no_nccl_in_this_build() {
  WEFT_FAIL(
      "this build of weft has no nccl backend: it needs the CUDA backend and NCCL 2.18 or newer "
      "at configure time (cmake -DWEFT_CUDA=ON with nccl.h and libnccl in the CUDA toolkit)");
}
}  // namespace
#endif

std::shared_ptr<ProcessGroup> init_world(std::string_view backend) {
  if (backend == "auto") return init_world();
  check_launcher();
  if (backend == "local") return local_world_of_one();
  if (backend == "mpi") {
    WEFT_CHECK(launched_by_mpi(),
               "the mpi backend needs a process started by mpirun; start the job as `mpirun -np "
               "N ...` or choose the local backend");
    return mpi_world();
  }
  if (backend == "nccl") {
#if WEFT_HAVE_NCCL
    return nccl_world();
#else
    no_nccl_in_this_build();
#endif
  }
  WEFT_FAIL("unknown communication backend '{}'; use auto, local, mpi or nccl", backend);
}

void run_world(int local_ranks, const std::function<void(ProcessGroup& world)>& fn) {
  run_world(local_ranks, fn, "auto");
}

void run_world(int local_ranks, const std::function<void(ProcessGroup& world)>& fn,
               std::string_view backend) {
  check_launcher();
  if (backend == "nccl") {
#if WEFT_HAVE_NCCL
    if (!launched_by_mpi()) {
      WEFT_CHECK(local_ranks == 1,
                 "the nccl backend runs one process per GPU: start {} ranks with `mpirun -np {}`",
                 local_ranks, local_ranks);
      return run_local(1, [&](ProcessGroup& local) {
        // A world of one: the local group carries the host tensors.
        std::shared_ptr<ProcessGroup> host = local.new_subgroups_by_enumeration({{0}}, "world");
        std::shared_ptr<ProcessGroup> world = hybrid_group(nccl_world_of_one(0), host);
        fn(*world);
      });
    }
#else
    no_nccl_in_this_build();
#endif
  }
  if (!launched_by_mpi()) return run_local(local_ranks, fn);
  std::shared_ptr<ProcessGroup> world;
  try {
    world = mpi_world();
#if WEFT_HAVE_NCCL
    if (backend == "nccl") world = hybrid_group(nccl_world_over(*world), world);
#endif
    fn(*world);
  } catch (const std::exception& e) {
    abort_job(e.what(), 2);
  } catch (...) {
    abort_job("an exception that is not a std::exception", 2);
  }
}

}  // namespace weft::comm
