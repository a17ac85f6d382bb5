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

#include "weft/comm/detail/op_queue.h"
#include "weft/comm/detail/reduce.h"

namespace weft::comm {

namespace {

using Clock = std::chrono::steady_clock;
using detail::Op;

constexpr int kQueryTag = 1;
constexpr int kHeaderTag = 1;
constexpr int kPayloadTag = 2;
// How long a rank whose operation timed out waits for its peers' answers.
constexpr auto kQueryWait = std::chrono::seconds(3);

std::string mpi_error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

void check_mpi(int rc, const std::string& what, const char* call) {
  if (rc != MPI_SUCCESS) WEFT_FAIL("{}: {} failed: {}", what, call, mpi_error_string(rc));
}

int as_int(int64_t n, const std::string& what) {
  WEFT_CHECK(n <= INT_MAX,
             "{}: {} elements in one MPI message exceed MPI's int counts; split the "
             "tensor",
             what, n);
  return static_cast<int>(n);
}

// The element types of the reducible dtypes (bf16 travels as its 16-bit words).
MPI_Datatype element_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i64: return MPI_INT64_T;
    default: return MPI_UINT16_T;
  }
}

// MPI initialized by us is finalized at exit, after the groups are gone.
struct Runtime {
  std::mutex mu;
  bool we_initialized = false;
  std::weak_ptr<ProcessGroup> world;

  static Runtime& get() {
    static Runtime runtime;
    return runtime;
  }
  void init() {
    std::lock_guard lock(mu);
    int initialized = 0;
    MPI_Initialized(&initialized);
    int provided = 0;
    if (!initialized) {
      int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
      WEFT_CHECK(rc == MPI_SUCCESS, "MPI_Init_thread failed: {}", mpi_error_string(rc));
      we_initialized = true;
      MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    } else {
      MPI_Query_thread(&provided);
    }
    WEFT_CHECK(provided == MPI_THREAD_MULTIPLE,
               "the MPI library provides thread level {} but weft needs MPI_THREAD_MULTIPLE ({}); "
               "use an Open MPI built with thread support",
               provided, MPI_THREAD_MULTIPLE);
    // Ranks on one machine share its cores: divide them, as the local backend
    // does for its rank threads (oversubscribed spinning kernels are slow).
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
      int local = 1;
      MPI_Comm_size(node, &local);
      set_ranks_in_process(local);
      MPI_Comm_free(&node);
    }
  }
  ~Runtime() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (we_initialized && !finalized) MPI_Finalize();
  }
};

int world_rank() {
  int initialized = 0, r = -1;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

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
  void respond() {
    for (;;) {
      int flag = 0;
      MPI_Status st;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, diag, &flag, &st) != MPI_SUCCESS || !flag) break;
      int64_t query[2];
      MPI_Recv(query, 2, MPI_INT64_T, st.MPI_SOURCE, kQueryTag, diag, MPI_STATUS_IGNORE);
      Reply& r = replies.emplace_back();
      r.data[0] = issued.load();
      r.data[1] = 0;
      MPI_Isend(r.data, 2, MPI_INT64_T, st.MPI_SOURCE, static_cast<int>(query[0]), diag, &r.req);
    }
    for (auto it = replies.begin(); it != replies.end();) {
      int done = 0;
      MPI_Test(&it->req, &done, MPI_STATUS_IGNORE);
      it = done ? replies.erase(it) : std::next(it);
    }
  }

  // Asks every peer how far it got and explains why `op` is not complete.
  std::string stragglers(OpKind kind, int64_t seq, int peer, bool on_worker) {
    int tag = 16 + next_tag.fetch_add(1) % 30000;
    std::vector<int64_t> answers(static_cast<size_t>(2 * size), -1);
    std::vector<MPI_Request> reqs;
    std::vector<int> asked;
    int64_t query[2] = {tag, 0};
    for (int p = 0; p < size; ++p) {
      if (p == rank) continue;
      MPI_Request s, r;
      MPI_Isend(query, 2, MPI_INT64_T, p, kQueryTag, diag, &s);
      MPI_Request_free(&s);
      MPI_Irecv(&answers[static_cast<size_t>(2 * p)], 2, MPI_INT64_T, p, tag, diag, &r);
      reqs.push_back(r);
      asked.push_back(p);
    }
    const auto deadline = Clock::now() + kQueryWait;
    int all = 0;
    while (!all && Clock::now() < deadline) {
      MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &all, MPI_STATUSES_IGNORE);
      if (on_worker) respond();
      if (!all) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::vector<int> behind, silent;
    for (size_t i = 0; i < asked.size(); ++i) {
      int p = asked[i];
      if (reqs[i] != MPI_REQUEST_NULL) {
        MPI_Cancel(&reqs[i]);
        MPI_Request_free(&reqs[i]);
        silent.push_back(p);
      } else if (is_collective(kind) && answers[static_cast<size_t>(2 * p)] <= seq) {
        behind.push_back(p);
      }
    }
    std::string text;
    if (!is_collective(kind)) {
      text = format("waiting for rank {}", ranks_str({peer}));
    } else if (!behind.empty()) {
      text = format("ranks {} did not arrive", ranks_str(behind));
    } else if (silent.empty()) {
      text = "all ranks arrived; the operation itself did not complete";
    }
    if (!silent.empty())
      text += format("{}ranks {} did not answer (hung or dead)", text.empty() ? "" : "; ",
                     ranks_str(silent));
    return text;
  }
};

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
                           op.kind == OpKind::barrier ? 0 : t.numel(),
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
