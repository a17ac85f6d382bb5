#include "weft/comm/world.h"

#include <cstdlib>
#include <exception>

#include "weft/comm/local.h"
#include "weft/comm/mpi.h"

namespace weft::comm {

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    const char* s = std::getenv(v);
    if (s && *s) return true;
  }
  return false;
}

std::shared_ptr<ProcessGroup> init_world() {
  if (launched_by_mpi()) return mpi_world();
  return local_world_of_one();
}

void run_world(int local_ranks, const std::function<void(ProcessGroup& world)>& fn) {
  if (!launched_by_mpi()) return run_local(local_ranks, fn);
  std::shared_ptr<ProcessGroup> world = mpi_world();
  try {
    fn(*world);
  } catch (const std::exception& e) {
    abort_job(e.what(), 2);
  } catch (...) {
    abort_job("an exception that is not a std::exception", 2);
  }
}

}  // namespace weft::comm
