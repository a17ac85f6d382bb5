// ProcessGroup: the collectives and point-to-point calls of a set of ranks.
//
// Every call is asynchronous: it checks its arguments on the calling thread,
// queues the operation and returns a Work. Each group runs its operations on
// one worker thread per rank, in the order they were issued, so calls on one
// group complete in issue order on every rank and an issued operation makes
// progress while the caller computes. The tensors must not be modified (nor,
// for outputs, read) until the Work is done; the Work keeps them alive.
//
// Conventions (as torch.distributed and nccl-tests):
//   all_gather(out, in)       out = concat over ranks of `in` along dim 0;
//                             in place when `in` is out.chunk(size)[rank].
//   reduce_scatter(out, in)   out = reduce over ranks of in.chunk(size)[rank];
//                             in place when `out` is in.chunk(size)[rank].
//   all_reduce(t) / (out, in) every rank gets the reduction of all inputs.
//   broadcast(t, root) / (out, in, root)   `in` is read on the root only.
//   all_to_all(out, in)       out.chunk(size)[p] = in.chunk(size)[rank] of rank p;
//                             in place when out is in.
//   send / recv / send_recv   point to point; send_recv posts both at once,
//                             so a ring exchange cannot deadlock.
// Reductions (sum, avg, max) need f32 or bf16; bf16 accumulates in f32 and is
// rounded once. Operations that do no arithmetic accept any dtype. Arguments
// that disagree between ranks (sizes, dtypes, roots, the operation itself)
// raise a weft::Error on every rank of the group.
//
// Timeouts: each operation must complete within the group's timeout (default
// 300 s, WEFT_COMM_TIMEOUT=<seconds> or set_timeout()); otherwise it fails
// with an error naming the group, the operation and the ranks that did not
// arrive, and the group is unusable afterwards.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "weft/comm/work.h"
#include "weft/core/tensor.h"

namespace weft::comm {

enum class ReduceOp : uint8_t { sum, avg, max };
std::string_view reduce_op_name(ReduceOp op);
// "sum", "avg", "max"; throws weft::Error otherwise.
ReduceOp parse_reduce_op(std::string_view name);

enum class OpKind : uint8_t {
  all_gather,
  reduce_scatter,
  all_reduce,
  broadcast,
  all_to_all,
  barrier,
  send,
  recv,
  send_recv,
};
inline constexpr int kNumOpKinds = 9;
std::string_view op_kind_name(OpKind kind);
// "all_gather", ..., "send_recv"; throws weft::Error otherwise.
OpKind parse_op_kind(std::string_view name);
// Collectives involve every rank of the group; send/recv/send_recv do not.
bool is_collective(OpKind kind);

// What was issued through a group, by kind. `bytes` counts the operation's
// size as nccl-tests does: the full output of all_gather, the full input of
// reduce_scatter, the tensor of all_reduce / broadcast / all_to_all, the
// payload of send and recv (send_recv counts both), 0 for barrier.
struct CommStats {
  std::array<int64_t, kNumOpKinds> calls{};
  std::array<int64_t, kNumOpKinds> bytes{};

  int64_t count(OpKind k) const { return calls[static_cast<size_t>(k)]; }
  int64_t bytes_of(OpKind k) const { return bytes[static_cast<size_t>(k)]; }
  int64_t total_calls() const;
  int64_t total_bytes() const;
};

// The default timeout: WEFT_COMM_TIMEOUT (seconds, may be fractional) or 300 s.
std::chrono::milliseconds default_timeout();

namespace detail {

// Ranks of a group as errors name them: "[3]", or "[3] (world ranks [7])"
// when the group's numbering differs from the world's.
std::string ranks_str(const std::vector<int>& ranks, const std::vector<int>& world_ranks);

// One queued operation, as the worker sees it.
struct Op {
  OpKind kind = OpKind::barrier;
  ReduceOp reduce = ReduceOp::sum;
  Tensor in{}, out{};  // send: in; recv: out; send_recv: both
  int peer = -1;       // broadcast root, send/send_recv destination
  int src = -1;        // recv/send_recv source
  bool in_place = false;
  int64_t index = 0;   // position among all operations issued on this group
  int64_t seq = -1;    // position among the collectives issued on this group
  std::string what{};  // "all_gather #3 on group 'tp'"
};

}  // namespace detail

class ProcessGroup {
 public:
  virtual ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // "world", "tp", ...: used in error messages.
  const std::string& name() const { return name_; }
  // The world rank of each rank of this group.
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  // "local" or "mpi".
  virtual std::string_view backend() const = 0;

  Work all_gather(const Tensor& out, const Tensor& in);
  Work reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op = ReduceOp::sum);
  Work all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::sum);
  Work all_reduce(const Tensor& out, const Tensor& in, ReduceOp op = ReduceOp::sum);
  Work broadcast(const Tensor& tensor, int root);
  Work broadcast(const Tensor& out, const Tensor& in, int root);
  Work all_to_all(const Tensor& out, const Tensor& in);
  Work barrier();
  Work send(const Tensor& tensor, int dst);
  Work recv(const Tensor& tensor, int src);
  Work send_recv(const Tensor& send_tensor, int dst, const Tensor& recv_tensor, int src);

  // Splits this group: every rank of this group calls it with the same lists
  // (disjoint, ranks of this group). Returns the new group that holds the
  // calling rank, or null when no list names it. Sub-groups inherit the timeout.
  std::shared_ptr<ProcessGroup> new_subgroups_by_enumeration(
      const std::vector<std::vector<int>>& rank_lists, const std::string& name);

  std::chrono::milliseconds timeout() const { return timeout_; }
  // Applies to operations issued afterwards.
  void set_timeout(std::chrono::milliseconds timeout);
  // Checking arguments against the other ranks costs one small exchange per
  // collective on the mpi backend (nothing on the local one); on by default.
  bool check_peers() const { return check_peers_; }
  void set_check_peers(bool on) { check_peers_ = on; }

  CommStats stats() const;
  void reset_stats();

 protected:
  ProcessGroup(std::string name, int rank, int size, std::vector<int> world_ranks);

  // Queues `op` on this rank's worker; `state` becomes done when it ran. The
  // backend may set state->stragglers to explain a wait that timed out.
  virtual void submit(detail::Op op, std::shared_ptr<detail::WorkState> state) = 0;
  // Collective over this group; lists are checked. color: the index of the
  // list holding this rank (-1 if none), key: the rank's position in it.
  virtual std::shared_ptr<ProcessGroup> split(const std::vector<std::vector<int>>& rank_lists,
                                              int color, int key, const std::string& name) = 0;

  // For backends: the group's description for messages, "group 'tp' (ranks 4-7)".
  std::string label() const;

 private:
  Work issue(detail::Op op, int64_t bytes);
  void check_dtype_reducible(const char* what, const Tensor& t, ReduceOp op) const;
  void check_peer(const char* what, const char* role, int peer, bool self_ok) const;

  std::string name_;
  int rank_;
  int size_;
  std::vector<int> world_ranks_;
  std::chrono::milliseconds timeout_;
  bool check_peers_ = true;

  mutable std::mutex mu_;  // serializes issue order, stats and counters
  int64_t issued_ = 0;
  int64_t collectives_ = 0;
  CommStats stats_;
};

}  // namespace weft::comm
