#include "weft/comm/mpi.h"

#include <cstdio>
#include <cstdlib>

#include "weft/core/error.h"
#include "weft/core/threads.h"

#if WEFT_HAVE_MPI

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <list>
#include <mutex>
#include <thread>

#include "weft/comm/detail/mpi_core.h"
#include "weft/comm/detail/op_queue.h"
#include "weft/comm/detail/reduce.h"

namespace weft::comm {

namespace {

using Clock = std::chrono::steady_clock;
using detail::as_int;
using detail::check_mpi;
using detail::Core;
using detail::element_type;
using detail::Op;
using detail::Runtime;
using detail::world_rank;

constexpr int kHeaderTag = 1;
constexpr int kPayloadTag = 2;

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup(MPI_Comm comm, std::string name, const std::vector<int>& world_ranks)
      : ProcessGroup(std::move(name), comm_rank(comm), comm_size(comm), world_ranks),
        core_(std::make_shared<Core>()) {
    core_->comm = comm;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    check_mpi(MPI_Comm_dup(comm, &core_->diag), label(), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(core_->diag, MPI_ERRORS_RETURN);
    core_->rank = rank();
    core_->size = size();
    core_->world_ranks = world_ranks;
    std::shared_ptr<Core> core = core_;
    queue_ = std::make_unique<detail::OpQueue>(
        rank(), size(), [this](Op& op) { execute(op); }, std::chrono::milliseconds(5),
        [core] { core->respond(); });
  }

  ~MpiProcessGroup() override { queue_.reset(); }

  std::string_view backend() const override { return "mpi"; }
  MPI_Comm comm() const { return core_->comm; }

  static int comm_rank(MPI_Comm c) {
    int r = 0;
    MPI_Comm_rank(c, &r);
    return r;
  }
  static int comm_size(MPI_Comm c) {
    int n = 0;
    MPI_Comm_size(c, &n);
    return n;
  }

 protected:
  std::shared_ptr<const Work::Impl> submit(Op op) override {
    if (is_collective(op.kind)) core_->issued.store(op.seq + 1);
    auto work = make_host_work(op);
    std::weak_ptr<Core> weak = core_;
    work->stragglers = [weak, kind = op.kind, seq = op.seq,
                        peer = op.kind == OpKind::recv ? op.src : op.peer] {
      auto core = weak.lock();
      return core ? core->stragglers(kind, seq, peer, false) : std::string();
    };
    queue_->push(std::move(op), work);
    return work;
  }

  std::shared_ptr<ProcessGroup> split(const std::vector<std::vector<int>>& lists, int color,
                                      int key, const std::string& name) override;

 private:
  void execute(Op& op);
  void check_peers_agree(const Op& op, const Clock::time_point& deadline);
  void reduce_scatter(Op& op, const Clock::time_point& deadline);
  void all_to_all_v(Op& op, const Clock::time_point& deadline);
  void all_reduce(Op& op, const Clock::time_point& deadline);
  void point_to_point(Op& op, const Clock::time_point& deadline);
  // Polls until all requests completed; on the deadline fails the group with
  // an error that names the stragglers.
  void complete(std::vector<MPI_Request>& reqs, const Op& op, const Clock::time_point& deadline);

  std::shared_ptr<Core> core_;
  std::unique_ptr<detail::OpQueue> queue_;
};

void MpiProcessGroup::complete(std::vector<MPI_Request>& reqs, const Op& op,
                               const Clock::time_point& deadline) {
  for (int spins = 1;; ++spins) {
    int all = 0;
    check_mpi(MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &all, MPI_STATUSES_IGNORE),
              op.what, "MPI_Testall");
    if (all) return;
    if (spins % 64 == 0) {
      core_->respond();
      if (Clock::now() >= deadline) {
        std::string who =
            core_->stragglers(op.kind, op.seq, op.kind == OpKind::recv ? op.src : op.peer, true);
        core_->failure = format("{} timed out after {} s on rank {}{}{}", op.what,
                                static_cast<double>(timeout().count()) / 1000.0, rank(),
                                who.empty() ? "" : ": ", who);
        throw Error(core_->failure);
      }
      if (spins > 4096) std::this_thread::yield();
    }
  }
}

void MpiProcessGroup::check_peers_agree(const Op& op, const Clock::time_point& deadline) {
  const Tensor& t = op.kind == OpKind::all_gather ? op.in : op.out;
  const bool reduces = op.kind == OpKind::all_reduce || op.kind == OpKind::reduce_scatter;
  constexpr int kFields = 6;
  int64_t mine[kFields] = {static_cast<int64_t>(op.kind),
                           op.kind == OpKind::barrier ? 0 : static_cast<int64_t>(t.dtype()),
                           op.kind == OpKind::barrier ? 0
                           : op.send_bytes.empty()    ? t.numel()
                                                      : -1,  // variable chunks: checked by MPI
                           reduces ? static_cast<int64_t>(op.reduce) : 0,
                           op.kind == OpKind::broadcast ? op.peer : 0,
                           static_cast<int64_t>(op.parts_in.size())};
  int64_t send[2 * kFields], recv[2 * kFields];
  for (int i = 0; i < kFields; ++i) {
    send[i] = mine[i];
    send[kFields + i] = -mine[i];
  }
  std::vector<MPI_Request> reqs(1);
  check_mpi(MPI_Iallreduce(send, recv, 2 * kFields, MPI_INT64_T, MPI_MAX, core_->comm, reqs.data()),
            op.what, "MPI_Iallreduce");
  complete(reqs, op, deadline);
  bool same = true;
  for (int i = 0; i < kFields; ++i)
    same = same && recv[i] == mine[i] && -recv[kFields + i] == mine[i];
  if (same) return;
  std::vector<int64_t> all(static_cast<size_t>(kFields * size()));
  check_mpi(MPI_Iallgather(mine, kFields, MPI_INT64_T, all.data(), kFields, MPI_INT64_T,
                           core_->comm, reqs.data()),
            op.what, "MPI_Iallgather");
  complete(reqs, op, deadline);
  std::string text;
  for (int p = 0; p < size(); ++p) {
    const int64_t* s = &all[static_cast<size_t>(kFields * p)];
    auto kind = static_cast<OpKind>(s[0]);
    text += format("{}rank {}: {}", p ? ", " : "", p, op_kind_name(kind));
    if (kind == OpKind::barrier) continue;
    text += format(" of {} {}", s[2], dtype_name(static_cast<DType>(s[1])));
    if (kind == OpKind::all_reduce || kind == OpKind::reduce_scatter)
      text += format(" ({})", reduce_op_name(static_cast<ReduceOp>(s[3])));
    if (kind == OpKind::broadcast) text += format(" from root {}", s[4]);
    if (s[5] > 0) text += format(" coalesced from {} tensors", s[5]);
  }
  core_->failure = format(
      "{}: the ranks disagree about the operation ({}); every rank must make "
      "the same collective calls in the same order with the same sizes and "
      "types",
      op.what, text);
  throw Error(core_->failure);
}

void MpiProcessGroup::execute(Op& op) {
  const Clock::time_point deadline = Clock::now() + timeout();
  if (!core_->failure.empty()) WEFT_FAIL("{} failed: {}", op.what, core_->failure);
  if (!is_collective(op.kind)) return point_to_point(op, deadline);
  if (check_peers()) check_peers_agree(op, deadline);
  const int n = size();
  MPI_Comm comm = core_->comm;
  std::vector<MPI_Request> reqs(1);
  switch (op.kind) {
    case OpKind::all_gather: {
      int chunk = as_int(op.in.nbytes(), op.what);
      const void* in = op.in_place ? MPI_IN_PLACE : op.in.raw();
      check_mpi(MPI_Iallgather(in, chunk, MPI_BYTE, op.out.raw(), chunk, MPI_BYTE, comm, &reqs[0]),
                op.what, "MPI_Iallgather");
      break;
    }
    case OpKind::reduce_scatter: return reduce_scatter(op, deadline);
    case OpKind::all_reduce: return all_reduce(op, deadline);
    case OpKind::broadcast: {
      if (rank() == op.peer && !op.in_place)
        std::memcpy(op.out.raw(), op.in.raw(), static_cast<size_t>(op.out.nbytes()));
      check_mpi(MPI_Ibcast(op.out.raw(), as_int(op.out.nbytes(), op.what), MPI_BYTE, op.peer, comm,
                           &reqs[0]),
                op.what, "MPI_Ibcast");
      break;
    }
    case OpKind::all_to_all: {
      if (!op.send_bytes.empty()) {
        all_to_all_v(op, deadline);
        return;
      }
      if (op.in_place) op.in = op.in.clone();
      int chunk = as_int(op.in.nbytes() / n, op.what);
      check_mpi(MPI_Ialltoall(op.in.raw(), chunk, MPI_BYTE, op.out.raw(), chunk, MPI_BYTE, comm,
                              &reqs[0]),
                op.what, "MPI_Ialltoall");
      break;
    }
    default: check_mpi(MPI_Ibarrier(comm, &reqs[0]), op.what, "MPI_Ibarrier"); break;
  }
  complete(reqs, op, deadline);
}

void MpiProcessGroup::all_to_all_v(Op& op, const Clock::time_point& deadline) {
  const auto n = static_cast<size_t>(size());
  std::vector<int> send(n), recv(n), send_at(n), recv_at(n);
  int64_t sent = 0, received = 0;
  for (size_t p = 0; p < n; ++p) {
    send[p] = as_int(op.send_bytes[p], op.what);
    recv[p] = as_int(op.recv_bytes[p], op.what);
    send_at[p] = as_int(sent, op.what);
    recv_at[p] = as_int(received, op.what);
    sent += op.send_bytes[p];
    received += op.recv_bytes[p];
  }
  std::vector<MPI_Request> reqs(1);
  check_mpi(MPI_Ialltoallv(op.in.raw(), send.data(), send_at.data(), MPI_BYTE, op.out.raw(),
                           recv.data(), recv_at.data(), MPI_BYTE, core_->comm, &reqs[0]),
            op.what, "MPI_Ialltoallv");
  complete(reqs, op, deadline);
}

void MpiProcessGroup::reduce_scatter(Op& op, const Clock::time_point& deadline) {
  const int n = size();
  const int64_t count = op.out.numel();
  const int64_t elem = dtype_bits(op.in.dtype()) / 8;
  // Chunk p of every rank's input lands in row p of `gathered`.
  Tensor gathered = Tensor::empty({op.in.numel()}, op.in.dtype());
  std::vector<MPI_Request> reqs(1);
  const MPI_Datatype type = element_type(op.in.dtype());
  check_mpi(MPI_Ialltoall(op.in.raw(), as_int(count, op.what), type, gathered.raw(),
                          as_int(count, op.what), type, core_->comm, &reqs[0]),
            op.what, "MPI_Ialltoall");
  complete(reqs, op, deadline);
  std::vector<const void*> inputs;
  for (int p = 0; p < n; ++p)
    inputs.push_back(static_cast<const char*>(gathered.raw()) + p * count * elem);
  detail::reduce_buffers(op.in.dtype(), op.reduce, op.out.raw(), inputs, count, n);
}

void MpiProcessGroup::all_reduce(Op& op, const Clock::time_point& deadline) {
  const int n = size(), me = rank();
  const int64_t count = op.in.numel();
  const int64_t elem = dtype_bits(op.in.dtype()) / 8;
  const auto part = [&](int p) { return count * p / n; };
  std::vector<int> counts(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) {
    displs[static_cast<size_t>(p)] = as_int(part(p), op.what);
    counts[static_cast<size_t>(p)] = as_int(part(p + 1) - part(p), op.what);
  }
  const int mine = counts[static_cast<size_t>(me)];
  // Every rank's copy of my part, one after the other.
  Tensor gathered = Tensor::empty({std::max<int64_t>(1, int64_t{mine} * n)}, op.in.dtype());
  std::vector<int> recv_counts(static_cast<size_t>(n), mine), recv_displs(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) recv_displs[static_cast<size_t>(p)] = p * mine;
  const MPI_Datatype type = element_type(op.in.dtype());
  std::vector<MPI_Request> reqs(1);
  check_mpi(MPI_Ialltoallv(op.in.raw(), counts.data(), displs.data(), type, gathered.raw(),
                           recv_counts.data(), recv_displs.data(), type, core_->comm, &reqs[0]),
            op.what, "MPI_Ialltoallv");
  complete(reqs, op, deadline);
  std::vector<const void*> inputs;
  for (int p = 0; p < n; ++p)
    inputs.push_back(static_cast<const char*>(gathered.raw()) + int64_t{p} * mine * elem);
  char* out = static_cast<char*>(op.out.raw());
  detail::reduce_buffers(op.in.dtype(), op.reduce, out + part(me) * elem, inputs, mine, n);
  check_mpi(MPI_Iallgatherv(MPI_IN_PLACE, 0, type, out, counts.data(), displs.data(), type,
                            core_->comm, &reqs[0]),
            op.what, "MPI_Iallgatherv");
  complete(reqs, op, deadline);
}

void MpiProcessGroup::point_to_point(Op& op, const Clock::time_point& deadline) {
  MPI_Comm comm = core_->comm;
  std::vector<MPI_Request> reqs;
  int64_t send_header[2] = {0, 0}, recv_header[2] = {0, 0};
  if (op.kind != OpKind::recv) {
    send_header[0] = static_cast<int64_t>(op.in.dtype());
    send_header[1] = op.in.nbytes();
    reqs.resize(2);
    check_mpi(MPI_Isend(send_header, 2, MPI_INT64_T, op.peer, kHeaderTag, comm, &reqs[0]), op.what,
              "MPI_Isend");
    check_mpi(MPI_Isend(op.in.raw(), as_int(op.in.nbytes(), op.what), MPI_BYTE, op.peer,
                        kPayloadTag, comm, &reqs[1]),
              op.what, "MPI_Isend");
  }
  if (op.kind != OpKind::send) {
    std::vector<MPI_Request> header(1);
    check_mpi(MPI_Irecv(recv_header, 2, MPI_INT64_T, op.src, kHeaderTag, comm, &header[0]), op.what,
              "MPI_Irecv");
    complete(header, op, deadline);
    const auto dtype = static_cast<DType>(recv_header[0]);
    const int64_t bytes = recv_header[1];
    const bool match = dtype == op.out.dtype() && bytes == op.out.nbytes();
    // A mismatched message is still received (into scratch) so the sender completes.
    Tensor scratch = match ? op.out : Tensor::empty({std::max<int64_t>(bytes, 1)}, DType::u8);
    reqs.emplace_back();
    check_mpi(MPI_Irecv(scratch.raw(), as_int(bytes, op.what), MPI_BYTE, op.src, kPayloadTag, comm,
                        &reqs.back()),
              op.what, "MPI_Irecv");
    complete(reqs, op, deadline);
    WEFT_CHECK(match,
               "{} on rank {}: rank {} sent {} bytes of {} but this rank receives {} {} "
               "elements ({})",
               op.what, rank(), op.src, bytes, dtype_name(dtype), op.out.numel(),
               dtype_name(op.out.dtype()), op.out.shape());
    return;
  }
  complete(reqs, op, deadline);
}

std::shared_ptr<ProcessGroup> MpiProcessGroup::split(const std::vector<std::vector<int>>& lists,
                                                     int color, int key, const std::string& name) {
  // The split runs on the diagnosis communicator: the worker may be using the
  // data communicator for a collective right now.
  uint64_t hash = 1469598103934665603ull;
  for (const auto& list : lists) {
    for (int r : list) hash = (hash ^ static_cast<uint64_t>(r + 1)) * 1099511628211ull;
    hash = (hash ^ 0xffu) * 1099511628211ull;
  }
  uint64_t lo = 0, hi = 0;
  const std::string what = format("new_subgroups_by_enumeration('{}') on {}", name, label());
  check_mpi(MPI_Allreduce(&hash, &lo, 1, MPI_UINT64_T, MPI_MIN, core_->diag), what,
            "MPI_Allreduce");
  check_mpi(MPI_Allreduce(&hash, &hi, 1, MPI_UINT64_T, MPI_MAX, core_->diag), what,
            "MPI_Allreduce");
  WEFT_CHECK(lo == hi,
             "{}: the ranks passed different rank lists; every rank must pass the same "
             "lists",
             what);
  MPI_Comm sub = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(core_->diag, color < 0 ? MPI_UNDEFINED : color, key, &sub), what,
            "MPI_Comm_split");
  if (color < 0) return nullptr;
  std::vector<int> ranks;
  for (int r : lists[static_cast<size_t>(color)])
    ranks.push_back(core_->world_ranks[static_cast<size_t>(r)]);
  return std::make_shared<MpiProcessGroup>(sub, name, ranks);
}

}  // namespace

std::shared_ptr<ProcessGroup> mpi_world() {
  Runtime& rt = Runtime::get();
  rt.init();
  std::lock_guard lock(rt.mu);
  if (auto w = rt.world.lock()) return w;
  MPI_Comm comm = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "creating the world group", "MPI_Comm_dup");
  int n = MpiProcessGroup::comm_size(comm);
  std::vector<int> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) ranks[static_cast<size_t>(r)] = r;
  auto world = std::make_shared<MpiProcessGroup>(comm, "world", ranks);
  rt.world = world;
  return world;
}

void abort_job(const std::string& message, int code) {
  int r = world_rank();
  if (r >= 0) {
    std::fprintf(stderr, "weft: rank %d: error: %s\n", r, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
  }
  std::fprintf(stderr, "weft: error: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(code);
}

void mpi_raw_collective(ProcessGroup& group, OpKind kind, const Tensor& out, const Tensor& in,
                        bool in_place, ReduceOp reduce, int root) {
  auto* g = dynamic_cast<MpiProcessGroup*>(&group);
  WEFT_CHECK(g, "mpi_raw_collective needs a group of the mpi backend, got '{}'", group.backend());
  const std::string what = format("raw MPI {}", op_kind_name(kind));
  const bool reduces = kind == OpKind::reduce_scatter || kind == OpKind::all_reduce;
  WEFT_CHECK(!reduces || in.dtype() == DType::f32, "{}: MPI reduces f32 only, got {}", what,
             dtype_name(in.dtype()));
  WEFT_CHECK(reduce != ReduceOp::avg || !reduces, "{}: MPI has no average; use sum", what);
  const MPI_Op mop = reduce == ReduceOp::max ? MPI_MAX : MPI_SUM;
  const void* src = in_place ? MPI_IN_PLACE : in.raw();
  const int n = g->size();
  MPI_Comm c = g->comm();
  int rc = MPI_SUCCESS;
  switch (kind) {
    case OpKind::all_gather: {
      int chunk = as_int(in.nbytes(), what);
      rc = MPI_Allgather(src, chunk, MPI_BYTE, out.raw(), chunk, MPI_BYTE, c);
      break;
    }
    case OpKind::reduce_scatter:
      rc = MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : in.raw(),
                                    in_place ? in.raw() : out.raw(), as_int(in.numel() / n, what),
                                    MPI_FLOAT, mop, c);
      break;
    case OpKind::all_reduce:
      rc = MPI_Allreduce(src, out.raw(), as_int(in.numel(), what), MPI_FLOAT, mop, c);
      break;
    case OpKind::broadcast:
      if (g->rank() == root && !in_place)
        std::memcpy(out.raw(), in.raw(), static_cast<size_t>(out.nbytes()));
      rc = MPI_Bcast(out.raw(), as_int(out.nbytes(), what), MPI_BYTE, root, c);
      break;
    case OpKind::all_to_all: {
      int chunk = as_int(in.nbytes() / n, what);
      rc = MPI_Alltoall(src, chunk, MPI_BYTE, out.raw(), chunk, MPI_BYTE, c);
      break;
    }
    case OpKind::barrier: rc = MPI_Barrier(c); break;
    default: WEFT_FAIL("{}: not a collective", what);
  }
  check_mpi(rc, what, "the MPI call");
}

}  // namespace weft::comm

#else  // no MPI in this build

namespace weft::comm {

std::shared_ptr<ProcessGroup> mpi_world() {
  WEFT_FAIL(
      "this weft was built without MPI; install libopenmpi-dev and rebuild, or use the local "
      "backend");
}

void abort_job(const std::string& message, int code) {
  std::fprintf(stderr, "weft: error: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(code);
}

void mpi_raw_collective(ProcessGroup&, OpKind, const Tensor&, const Tensor&, bool, ReduceOp, int) {
  WEFT_FAIL("this weft was built without MPI");
}

}  // namespace weft::comm

#endif
