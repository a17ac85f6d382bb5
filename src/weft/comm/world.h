// Choosing the backend: a process started by mpirun (or srun, mpiexec) uses
// the mpi backend, anything else the local one; the nccl backend is chosen by
// name only.
#pragma once

#include <functional>
#include <memory>
#include <string_view>

#include "weft/comm/process_group.h"

namespace weft::comm {

// Whether the environment says an MPI launcher started this process
// (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK).
bool launched_by_mpi();

// The world size an MPI launcher announces (OMPI_COMM_WORLD_SIZE, PMI_SIZE,
// PMIX_SIZE) before MPI starts; 0 when it announces none. The one place the
// launcher's environment is read.
int launcher_world_size();

// Refuses a process that a torchrun-style launcher started as one of several
// ranks (WORLD_SIZE > 1 without an MPI launcher): each would otherwise run a
// job of its own. init_world() and run_world() call it.
void check_launcher();

// The world group of this process: the mpi backend under mpirun, otherwise a
// local world of one rank (the calling thread). Use run_world() to run n
// local ranks.
std::shared_ptr<ProcessGroup> init_world();
// The world group on the backend named `backend`: "auto" (as init_world()),
// "local" (a world of one rank), "mpi" (under mpirun) or "nccl" (one GPU per
// rank, comm/cuda/nccl.h; builds with NCCL only).
std::shared_ptr<ProcessGroup> init_world(std::string_view backend);

// Runs fn(world) on every rank. Under mpirun: this process is one rank of
// the mpi world, and an exception escaping fn prints the error and aborts the
// job (MPI_Abort), so no other rank is left waiting. Otherwise: run_local with
// `local_ranks` threads, rethrowing the first rank's exception.
void run_world(int local_ranks, const std::function<void(ProcessGroup& world)>& fn);
// The same on a named backend: "auto" as above; "nccl": one GPU per process,
// the world a hybrid group (comm/hybrid.h) whose GPU tensors go over NCCL and
// whose host tensors over MPI (under mpirun) or within the process (one
// rank without mpirun; more is an error: NCCL takes one GPU per rank).
void run_world(int local_ranks, const std::function<void(ProcessGroup& world)>& fn,
               std::string_view backend);

}  // namespace weft::comm
