// What the MPI backend's groups share below the group itself: error and
// count helpers, the MPI runtime (initialized once, finalized at exit) and a
// group's Core, which answers its peers' progress queries and explains which
// ranks a timed-out operation waits for. Internal to comm/mpi.cpp; compiled
// only with MPI (WEFT_HAVE_MPI).
#pragma once

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "weft/comm/detail/op.h"
#include "weft/comm/process_group.h"

namespace weft::comm::detail {

// MPI's text for an error code.
std::string mpi_error_string(int rc);
// Throws weft::Error naming `what` and `call` unless rc is MPI_SUCCESS.
void check_mpi(int rc, const std::string& what, const char* call);
// n as an MPI count; throws weft::Error naming `what` past INT_MAX.
int as_int(int64_t n, const std::string& what);
// The element types of the reducible dtypes (bf16 travels as its 16-bit words).
MPI_Datatype element_type(DType t);
// This process's rank in MPI_COMM_WORLD; -1 before MPI_Init.
int world_rank();

// MPI initialized by us is finalized at exit, after the groups are gone.
struct Runtime {
  std::mutex mu;
  bool we_initialized = false;
  std::weak_ptr<ProcessGroup> world;

  static Runtime& get() {
    static Runtime runtime;
    return runtime;
  }
  void init();
  ~Runtime() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (we_initialized && !finalized) MPI_Finalize();
  }
};

// What a group's worker and its diagnosis share; outlives the group while a
// Work handle may still ask it about stragglers.
struct Core {
  MPI_Comm comm = MPI_COMM_NULL;  // data
  MPI_Comm diag = MPI_COMM_NULL;  // queries about progress
  int rank = 0, size = 1;
  std::vector<int> world_ranks;
  std::atomic<int64_t> issued{0};  // collectives issued on this rank
  std::atomic<int> next_tag{16};
  std::string failure;  // worker only: set once the group is unusable

  struct Reply {
    int64_t data[2];
    MPI_Request req = MPI_REQUEST_NULL;
  };
  std::list<Reply> replies;  // worker only

  ~Core() {
    for (auto& r : replies)
      if (r.req != MPI_REQUEST_NULL) MPI_Request_free(&r.req);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (diag != MPI_COMM_NULL) MPI_Comm_free(&diag);
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }

  std::string ranks_str(const std::vector<int>& ranks) const {
    return detail::ranks_str(ranks, world_ranks);
  }

  // Answers the peers' queries; called by the worker only.
  void respond();
  // Asks every peer how far it got and explains why `op` is not complete.
  std::string stragglers(OpKind kind, int64_t seq, int peer, bool on_worker);
};

}  // namespace weft::comm::detail
