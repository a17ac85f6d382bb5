// ProcessGroup: the collectives and point-to-point calls of a set of ranks.
//
// Every call is asynchronous: it checks its arguments on the calling thread,
// queues the operation and returns a Work. Each group runs its operations on
// one worker thread per rank, in the order they were issued, so calls on one
// group complete in issue order on every rank and an issued operation makes
// progress while the caller computes. The tensors must not be modified (nor,
// for outputs, read) until the Work is done; the group keeps them alive until then.
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
//   all_to_all(out, in, out_rows, in_rows)   variable chunks (MPI's alltoallv):
//                             in's rows are in_rows[0], in_rows[1], ... rows
//                             for ranks 0, 1, ...; out receives out_rows[p]
//                             rows from rank p, in rank order. out_rows[p]
//                             must equal rank p's in_rows[rank]; never in place.
//   send / recv / send_recv   point to point; send_recv posts both at once,
//                             so a ring exchange cannot deadlock.
// Reductions (sum, avg, max) take f32, bf16, f64 or i64: bf16 accumulates in
// f32 and is rounded once, f64 in f64, i64 in i64 (a sum wraps around on
// overflow; avg divides with truncation toward zero). Operations that do no arithmetic accept any
// dtype. Arguments that disagree between ranks (sizes, dtypes, roots, the operation itself) raise a
// weft::Error on every rank of the group.
//
// Devices: the tensors of one call must be on one device. The mpi backend
// moves host memory only; the local backend also moves GPU memory, its ranks
// being threads that share one GPU (local.cpp says how it orders the copies
// with the ranks' streams).
//
// Timeouts: each operation must complete within the group's timeout (default
// 300 s, WEFT_COMM_TIMEOUT=<seconds> or set_timeout()); otherwise it fails
// with an error naming the group, the operation and the ranks that did not
// arrive, and the group is unusable afterwards.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
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

// What a group reports to its observer (set_observer). An operation is
// `issued` as the call queues it, `completed` when it finished on this rank
// (successfully or not; reported before any wait on its Work returns);
// `wait_begin` and `wait_end` bracket every wait on its Work (wait_end also
// when the wait throws). Events are delivered on the thread where they
// happen: issued and wait_* on the caller's, completed on the group's worker.
struct CommEvent {
  enum class Kind : uint8_t { issued, wait_begin, wait_end, completed };
  Kind kind = Kind::issued;
  OpKind op = OpKind::barrier;
  int64_t index = 0;  // position among all operations issued on the group
  std::string what;   // "all_gather #3 on group 'tp' (world ranks [0, 1])"
};
std::string_view comm_event_kind_name(CommEvent::Kind kind);
using CommObserver = std::function<void(const CommEvent&)>;

namespace detail {
struct Op;
class HostWork;
class ObserverSlot;
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
  // "local", "mpi", "nccl" or "nccl+mpi" (comm/hybrid.h).
  virtual std::string_view backend() const = 0;
  // The accelerator whose memory this group moves (nccl: its GPU); the CPU
  // for the host backends.
  virtual Device device() const { return Device::cpu(); }

  Work all_gather(const Tensor& out, const Tensor& in);
  Work reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op = ReduceOp::sum);
  Work all_reduce(const Tensor& tensor, ReduceOp op = ReduceOp::sum);
  Work all_reduce(const Tensor& out, const Tensor& in, ReduceOp op = ReduceOp::sum);
  Work broadcast(const Tensor& tensor, int root);
  Work broadcast(const Tensor& out, const Tensor& in, int root);
  Work all_to_all(const Tensor& out, const Tensor& in);
  Work all_to_all(const Tensor& out, const Tensor& in, std::span<const int64_t> out_rows,
                  std::span<const int64_t> in_rows);
  Work barrier();
  Work send(const Tensor& tensor, int dst);
  Work recv(const Tensor& tensor, int src);
  Work send_recv(const Tensor& send_tensor, int dst, const Tensor& recv_tensor, int src);

  // Coalesced collectives: one operation over several tensors of one dtype,
  // with one Work, counted as one call of its kind in stats() (its bytes the
  // sum). Each tensor (pair) follows the rules of the single call, in place
  // included. The host backends pack the tensors into one buffer on the
  // worker thread, run one collective on it and copy the results out: one
  // message exchange for many small tensors, at the cost of a copy in and
  // out. An empty list returns a completed Work and communicates nothing
  // (then every rank must pass an empty list).
  Work all_reduce_coalesced(std::span<const Tensor> tensors, ReduceOp op = ReduceOp::sum);
  Work all_gather_coalesced(std::span<const Tensor> outs, std::span<const Tensor> ins);
  Work reduce_scatter_coalesced(std::span<const Tensor> outs, std::span<const Tensor> ins,
                                ReduceOp op = ReduceOp::sum);

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

  // Reports every operation's events (CommEvent) to `observer` from now on;
  // null removes it. For tests and tracing: the observer runs on the thread
  // where the event happens, must be thread-safe, must not throw and must not
  // issue operations on this group. Events already being delivered on other
  // threads may finish after this returns. Without an observer an event
  // costs one atomic load.
  void set_observer(CommObserver observer);

 protected:
  ProcessGroup(std::string name, int rank, int size, std::vector<int> world_ranks);

  // Queues `op` (detail/op.h) on this rank's worker and returns what its Work
  // refers to. Called in issue order, one call at a time.
  virtual std::shared_ptr<const Work::Impl> submit(detail::Op op) = 0;
  // Collective over this group; lists are checked. color: the index of the
  // list holding this rank (-1 if none), key: the rank's position in it.
  virtual std::shared_ptr<ProcessGroup> split(const std::vector<std::vector<int>>& rank_lists,
                                              int color, int key, const std::string& name) = 0;

  // Why this backend cannot move tensors on `d`, as a clause for an error
  // message; empty when it can. The host backends move host memory only.
  virtual std::string unsupported(Device d) const;

  // For a group that hands its operations to other groups (comm/hybrid.h):
  // `to`'s submit, with the operation as this group numbered it.
  static std::shared_ptr<const Work::Impl> submit_to(ProcessGroup& to, detail::Op op);

  // For backends: the group's description for messages, "group 'tp' (ranks 4-7)".
  std::string label() const;
  // For host backends: the Work::Impl of `op` (detail/host_work.h), which
  // reports to this group's observer; the worker finishes it.
  std::shared_ptr<detail::HostWork> make_host_work(const detail::Op& op) const;

 private:
  Work issue(detail::Op op, int64_t bytes);
  // Every tensor of `op` on one device, which this backend can move.
  void check_devices(const detail::Op& op) const;
  Work issue_coalesced(OpKind kind, ReduceOp reduce, std::span<const Tensor> outs,
                       std::span<const Tensor> ins);
  void check_peer(const char* what, const char* role, int peer, bool self_ok) const;

  std::string name_;
  int rank_;
  int size_;
  std::vector<int> world_ranks_;
  std::chrono::milliseconds timeout_;
  bool check_peers_ = true;

  std::shared_ptr<detail::ObserverSlot> observer_;
  std::mutex issue_mu_;    // serializes issuing: numbering, the issued event, submit
  mutable std::mutex mu_;  // numbering and stats
  int64_t issued_ = 0;
  int64_t collectives_ = 0;
  CommStats stats_;
};

}  // namespace weft::comm
