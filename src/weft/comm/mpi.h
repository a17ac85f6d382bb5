// The mpi backend: one rank per process, Open MPI underneath.
//
// MPI is initialized with MPI_THREAD_MULTIPLE on first use and finalized at
// exit. Each group owns a communicator (sub-groups come from MPI_Comm_split)
// and a worker thread that runs the group's operations in issue order with
// non-blocking MPI calls, polling MPI_Test against the group's deadline, so an
// issued operation progresses while the caller computes and no wait can hang.
// all_gather, broadcast, all_to_all and barrier map to the MPI collective;
// reduce_scatter and all_reduce exchange chunks with MPI_Ialltoall(v) and
// reduce them locally (then MPI_Iallgatherv for all_reduce): f32 and bf16 in
// f32, which gives bf16 its f32 accumulation, f64 (MPI_DOUBLE) and i64
// (MPI_INT64_T) in their own type, every dtype in a fixed order. A coalesced
// call is one of these on a buffer the worker packs the tensors into. Before each
// collective (unless check_peers is off) the ranks compare what they called
// with one small MPI_Iallreduce, so a mismatch is an error rather than a
// hang or corrupt data. Point-to-point messages carry a small header (dtype,
// size) that the receiver checks.
//
// Diagnosis: each group has a second communicator on which the worker answers
// "how many collectives have you issued?" while it waits or idles. A rank
// whose operation times out asks its peers, and the error names those that
// have not reached the operation and those that did not answer.
#pragma once

#include <memory>
#include <string>

#include "weft/comm/process_group.h"

namespace weft::comm {

// The world group of this process under mpirun (initializes MPI). Repeated
// calls return the same group while it is alive.
std::shared_ptr<ProcessGroup> mpi_world();
// Prints "weft: rank R: error: <message>" to stderr and ends the whole MPI
// job (MPI_Abort); exits the process when MPI is not running.
[[noreturn]] void abort_job(const std::string& message, int code = 1);

// The benchmark baseline: calls the MPI collective for `kind` directly and
// blocks (MPI_Allgather, MPI_Reduce_scatter_block, MPI_Allreduce, MPI_Bcast,
// MPI_Alltoall, MPI_Barrier) on the communicator of an mpi-backend group.
// Reductions need f32 (MPI has no bf16). Only while no operation of `group`
// is in flight.
void mpi_raw_collective(ProcessGroup& group, OpKind kind, const Tensor& out, const Tensor& in,
                        bool in_place, ReduceOp reduce = ReduceOp::sum, int root = 0);

}  // namespace weft::comm
