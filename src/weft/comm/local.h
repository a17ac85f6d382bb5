// The local backend: the ranks of a group are threads of one process.
//
// run_local(n, fn) starts n rank threads and calls fn(world) on each. Every
// rank thread has its own MemoryTracker (so "memory per rank" means what it
// means under MPI) and ranks_in_process() is n while they run.
//
// How an operation runs: each rank's worker thread (one per group and rank)
// publishes its operation in a slot shared by the group and waits until all
// ranks have arrived. Then every rank *pulls*: it reads its peers' buffers
// directly and writes only its own output (all_gather copies the peers'
// chunks, reduce_scatter reduces its chunk of every input, all_reduce is a
// reduce-scatter phase and an all-gather phase, broadcast copies from the
// root). A final barrier keeps every input alive and unchanged until all
// peers have read it. The copying is spread over all ranks and done by the
// worker threads, so an issued operation progresses while the rank computes.
// Point-to-point: the sender posts its buffer in a per-pair mailbox and the
// receiver copies from it (messages between two ranks arrive in order).
//
// GPU tensors: the rank threads share one GPU (each with its own
// ExecContext::cuda stream); the workers move device memory with cudaMemcpy
// and reduce it with a kernel (comm/cuda/reduce.cu, the CPU's arithmetic, so
// the same bits), on the legacy default stream, and wait for it before they
// report; local.cpp explains why that orders them with the ranks' streams.
//
// Failures: an exception escaping fn on any rank aborts every group of the
// run: operations that wait for peers fail at once with an error naming the
// failed rank, and run_local rethrows the first error after all rank threads
// finished. An operation that was joined by every rank always runs to its end,
// so no rank can read a peer buffer that was released.
#pragma once

#include <functional>
#include <memory>

#include "weft/comm/process_group.h"

namespace weft::comm {

// Runs fn(world) on n threads (n >= 1); rethrows the first rank's exception.
void run_local(int n, const std::function<void(ProcessGroup& world)>& fn);

// A world of one rank, the calling thread (what init_world() returns outside mpirun).
std::shared_ptr<ProcessGroup> local_world_of_one();

}  // namespace weft::comm
