// The nccl backend: one rank per GPU, NCCL underneath (builds with the CUDA
// backend and NCCL >= 2.18 only; WEFT_HAVE_NCCL says so).
//
// A group holds an NCCL communicator on one GPU and a stream of its own on it
// (non-blocking, so that nothing else on the device waits for a collective
// that waits for its peers). The tensors of every call must be on that GPU.
//
// Ordering with the caller: the calls carry no execution context, so an
// operation is ordered after everything queued on the device's weft streams
// before the call: the group records an event on the legacy default stream,
// which every weft stream synchronizes with (core/cuda.h), and its stream
// waits on it. Work::wait(context) makes the context's stream wait on the
// operation's event without blocking the host; wait() blocks the host.
//
// Operations: reductions (sum, avg -> ncclAvg, max) in the tensor's dtype
// (f32, bf16, f64, i64; NCCL's bf16 sums round at every step of its
// algorithm, not once as the host backends do); everything else moves bytes,
// so it takes any dtype. all_to_all and send_recv are grouped
// ncclSend/ncclRecv, barrier an all-reduce of one element, a coalesced call
// the single calls in one ncclGroupStart/ncclGroupEnd. Unlike the mpi
// backend, the ranks do not compare their arguments first, and a receive does
// not check what was sent: mismatched calls are undefined (wrong data or a
// timeout).
//
// Failures: a watchdog thread per group finishes the Works as their events
// complete. An operation still running after the group's timeout (counted
// from its call), or an asynchronous error NCCL reports, aborts the
// communicator (ncclCommAbort, which also stops its kernels) and fails every
// pending Work with an error naming the group, the operation and the world
// ranks; the group is unusable afterwards. A group being destroyed first
// waits for its pending operations, each bounded by its timeout.
#pragma once

#include <memory>

#include "weft/comm/process_group.h"

namespace weft::comm {

// A world of one rank on GPU `device` (no MPI): single-GPU runs and tests.
std::shared_ptr<ProcessGroup> nccl_world_of_one(int device = 0);

// A world with the ranks of `bootstrap` (a host group: local or mpi), one GPU
// per rank: rank 0 makes the NCCL id and broadcasts it over `bootstrap`, and
// each rank takes GPU (its index among the ranks on its host) modulo the GPUs
// it sees, as LOCAL_RANK does (with CUDA_VISIBLE_DEVICES giving each rank its
// own GPU, every rank sees one); two ranks of a host on the same physical GPU
// (the same PCI bus id) is an error naming them (NCCL refuses it). A rank that never joins is
// named by the bootstrap group's timeout (the host-name exchange comes first).
// Collective over `bootstrap`.
std::shared_ptr<ProcessGroup> nccl_world_over(ProcessGroup& bootstrap);

// The world of this process on the nccl backend: under mpirun the mpi world's
// ranks (nccl_world_over(mpi_world())), otherwise a world of one on cuda:0.
std::shared_ptr<ProcessGroup> nccl_world();

}  // namespace weft::comm
