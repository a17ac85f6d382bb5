#include "weft/comm/cuda/nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "weft/comm/cuda/nccl_handles.h"
#include "weft/comm/detail/host_work.h"
#include "weft/comm/detail/op.h"
#include "weft/comm/mpi.h"
#include "weft/comm/world.h"
#include "weft/core/cuda.h"
#include "weft/core/cuda/check.h"
#include "weft/core/cuda/device_guard.h"
#include "weft/core/error.h"
#include "weft/core/exec_context.h"

namespace weft::comm {

namespace {

using Clock = std::chrono::steady_clock;
using detail::Op;
using nccl::check_nccl;
using nccl::Communicator;
using nccl::Event;
using nccl::nccl_error;
using nccl::reduce_op;
using nccl::reduce_type;
using nccl::Stream;

// How often the watchdog looks at the events of pending operations: often
// enough that a host wait returns soon after the GPU finished.
constexpr auto kPoll = std::chrono::microseconds(200);
// How long the tensors of an aborted operation stay alive for its kernels to
// stop (ncclCommAbort stops NCCL's own); past it they are leaked rather than
// handed to the allocator while the GPU might still write them.
constexpr auto kAbortGrace = std::chrono::seconds(30);

std::string seconds(std::chrono::milliseconds ms) {
  return format("{} s", static_cast<double>(ms.count()) / 1000.0);
}

// The Work of one operation. Its state, error, waits and observer events are
// a HostWork's, which the group's watchdog finishes once the operation's
// event completed; `done` lets a CUDA context wait for it on its stream.
class NcclWork final : public Work::Impl {
 public:
  NcclWork(std::shared_ptr<detail::HostWork> state, std::shared_ptr<const Event> done)
      : state_(std::move(state)), done_(std::move(done)) {}

  bool completed() const override { return state_->completed(); }
  void wait() const override { state_->wait(); }
  void wait_for(std::chrono::milliseconds timeout) const override { state_->wait_for(timeout); }
  void wait_on(const ExecContext& context) const override {
    if (!context.device().is_cuda()) return wait();
    if (std::exception_ptr err = state_->error()) std::rethrow_exception(err);
    const weft::cuda::DeviceGuard on(context.device().index, state_->what());
    WEFT_CUDA_CHECK(
        cudaStreamWaitEvent(static_cast<cudaStream_t>(context.stream()), done_->get(), 0),
        state_->what());
  }
  std::exception_ptr error() const override { return state_->error(); }
  std::string what() const override { return state_->what(); }

 private:
  std::shared_ptr<detail::HostWork> state_;
  std::shared_ptr<const Event> done_;
};

// An operation on the group's stream that the watchdog has not finished.
struct Pending {
  std::shared_ptr<detail::HostWork> state{};
  std::shared_ptr<const Event> done{};  // recorded after the operation
  std::vector<Tensor> keep{};           // what the GPU reads and writes, alive until it is done
  int64_t index = 0;
  Clock::time_point deadline{};
  std::chrono::milliseconds timeout{};
};

class NcclProcessGroup final : public ProcessGroup {
 public:
  // Takes `comm`, a communicator on `device` whose ranks are `world_ranks`.
  NcclProcessGroup(ncclComm_t comm, int device, std::string name, int rank, int size,
                   std::vector<int> world_ranks);
  ~NcclProcessGroup() override;

  std::string_view backend() const override { return "nccl"; }
  Device device() const override { return Device::cuda(device_); }

 protected:
  std::string unsupported(Device d) const override;
  std::shared_ptr<const Work::Impl> submit(Op op) override;
  std::shared_ptr<ProcessGroup> split(const std::vector<std::vector<int>>& lists, int color,
                                      int key, const std::string& name) override;

 private:
  // Queues `op` on stream_ after the work queued before it on the device's
  // weft streams, then records `done`; returns the first failure's message
  // (empty when everything was queued). Under comm_mu_.
  std::string launch(Op& op, const Event& done, std::vector<Tensor>& keep);
  void watch();
  // Aborts the communicator and fails every pending operation: the one
  // numbered `culprit` with `cause`, the others with "<op> failed: <cause>".
  void fail_group(const std::string& cause, int64_t culprit);
  // The communicator's asynchronous error, as a message; empty if none.
  std::string async_error();

  const int device_;
  Communicator comm_;  // guarded by comm_mu_: NCCL communicators are not thread-safe
  std::mutex comm_mu_;
  Stream stream_;
  Event ready_;    // recorded on the legacy default stream, waited on by stream_
  Tensor scalar_;  // the one element a barrier all-reduces

  std::mutex pending_mu_;
  std::condition_variable pending_cv_;
  std::deque<Pending> pending_;  // in issue order, which is completion order
  std::deque<Pending> aborted_;  // failed, kept alive until their kernels stopped
  Clock::time_point aborted_at_;
  std::string failure_;  // set once, when the group failed
  bool stopping_ = false;
  std::thread watchdog_;
};

NcclProcessGroup::NcclProcessGroup(ncclComm_t comm, int device, std::string name, int rank,
                                   int size, std::vector<int> world_ranks)
    : ProcessGroup(std::move(name), rank, size, std::move(world_ranks)),
      device_(device),
      comm_(comm),
      stream_(device, "creating an nccl group"),
      ready_(device, "creating an nccl group") {
  const cuda::ScopedAllocationStream on_stream(stream_.get());
  scalar_ = Tensor::zeros({1}, DType::f32, Device::cuda(device_), MemoryTag::comm);
  watchdog_ = std::thread([this] { watch(); });
}

NcclProcessGroup::~NcclProcessGroup() {
  {
    std::lock_guard lock(pending_mu_);
    stopping_ = true;
  }
  pending_cv_.notify_all();
  watchdog_.join();
}

std::string NcclProcessGroup::unsupported(Device d) const {
  if (d == Device::cuda(device_)) return {};
  return format(
      "the nccl backend's {} moves memory of cuda:{} only (copy the tensors there "
      "with Tensor::to)",
      label(), device_);
}

namespace {

// One operation being queued: the NCCL and CUDA calls of its kind on the
// group's stream, keeping the message of the first call that failed.
struct Launch {
  Op& op;
  ncclComm_t comm;
  cudaStream_t stream;
  int size;
  std::string error{};

  bool cuda_ok(cudaError_t status, const char* call) {
    if (status != cudaSuccess && error.empty())
      error = format("{}: {} failed: {} ({})", op.what, call, cudaGetErrorString(status),
                     cudaGetErrorName(status));
    return error.empty();
  }
  void nccl(ncclResult_t status, const char* call) {
    if (status != ncclSuccess && error.empty())
      error = format("{}: {} failed: {}", op.what, call, nccl_error(status, comm));
  }

  // all_gather, reduce_scatter or all_reduce of one pair of tensors.
  void reduction(const Tensor& out, const Tensor& in) {
    switch (op.kind) {
      case OpKind::all_gather:
        // In place when `in` is this rank's chunk of `out`, as NCCL defines it.
        nccl(ncclAllGather(in.raw(), out.raw(), static_cast<size_t>(in.nbytes()), ncclUint8, comm,
                           stream),
             "ncclAllGather");
        break;
      case OpKind::reduce_scatter:
        nccl(ncclReduceScatter(in.raw(), out.raw(), static_cast<size_t>(out.numel()),
                               reduce_type(in.dtype()), reduce_op(op.reduce), comm, stream),
             "ncclReduceScatter");
        break;
      default:
        nccl(ncclAllReduce(in.raw(), out.raw(), static_cast<size_t>(in.numel()),
                           reduce_type(in.dtype()), reduce_op(op.reduce), comm, stream),
             "ncclAllReduce");
        break;
    }
  }

  // Variable chunks: one send and one receive per peer with data, in one NCCL group.
  void all_to_all_v() {
    const char* from = static_cast<const char*>(op.in.raw());
    char* to = static_cast<char*>(op.out.raw());
    nccl(ncclGroupStart(), "ncclGroupStart");
    for (int p = 0; p < size; ++p) {
      const auto i = static_cast<size_t>(p);
      if (op.send_bytes[i] > 0)
        nccl(ncclSend(from, static_cast<size_t>(op.send_bytes[i]), ncclUint8, p, comm, stream),
             "ncclSend");
      if (op.recv_bytes[i] > 0)
        nccl(ncclRecv(to, static_cast<size_t>(op.recv_bytes[i]), ncclUint8, p, comm, stream),
             "ncclRecv");
      from += op.send_bytes[i];
      to += op.recv_bytes[i];
    }
    nccl(ncclGroupEnd(), "ncclGroupEnd");
  }

  // Every part of a coalesced operation in one NCCL group.
  void coalesced(std::vector<Tensor>& keep) {
    nccl(ncclGroupStart(), "ncclGroupStart");
    for (size_t i = 0; i < op.parts_in.size(); ++i) reduction(op.parts_out[i], op.parts_in[i]);
    nccl(ncclGroupEnd(), "ncclGroupEnd");
    keep = std::move(op.parts_in);
    keep.insert(keep.end(), op.parts_out.begin(), op.parts_out.end());
  }

  void all_to_all(std::vector<Tensor>& keep) {
    if (!op.send_bytes.empty()) return all_to_all_v();
    Tensor in = op.in;
    if (op.in_place) {
      // Peers' chunks land in `out` while this rank's are still being sent from it.
      const cuda::ScopedAllocationStream on_stream(stream);
      in = Tensor::empty(op.in.shape(), op.in.dtype(), op.in.device(), MemoryTag::comm);
      if (!cuda_ok(cudaMemcpyAsync(in.raw(), op.in.raw(), static_cast<size_t>(op.in.nbytes()),
                                   cudaMemcpyDeviceToDevice, stream),
                   "cudaMemcpyAsync"))
        return;  // nothing else is queued; the caller fails the operation
      keep.push_back(in);
    }
    const size_t chunk = static_cast<size_t>(op.in.nbytes() / size);
    const char* from = static_cast<const char*>(in.raw());
    char* to = static_cast<char*>(op.out.raw());
    nccl(ncclGroupStart(), "ncclGroupStart");
    for (int p = 0; p < size; ++p) {
      const size_t at = chunk * static_cast<size_t>(p);
      nccl(ncclSend(from + at, chunk, ncclUint8, p, comm, stream), "ncclSend");
      nccl(ncclRecv(to + at, chunk, ncclUint8, p, comm, stream), "ncclRecv");
    }
    nccl(ncclGroupEnd(), "ncclGroupEnd");
  }

  // send, recv, send_recv: grouped, so that a send_recv around a ring cannot deadlock.
  void point_to_point() {
    nccl(ncclGroupStart(), "ncclGroupStart");
    if (op.kind != OpKind::recv)
      nccl(ncclSend(op.in.raw(), static_cast<size_t>(op.in.nbytes()), ncclUint8, op.peer, comm,
                    stream),
           "ncclSend");
    if (op.kind != OpKind::send)
      nccl(ncclRecv(op.out.raw(), static_cast<size_t>(op.out.nbytes()), ncclUint8, op.src, comm,
                    stream),
           "ncclRecv");
    nccl(ncclGroupEnd(), "ncclGroupEnd");
  }
};

}  // namespace

std::string NcclProcessGroup::launch(Op& op, const Event& done, std::vector<Tensor>& keep) {
  Launch l{.op = op, .comm = comm_.get(), .stream = stream_.get(), .size = size()};
  // The caller's kernels that produce the inputs (and last read the outputs)
  // were queued on weft streams before this call; the legacy default stream
  // waits for all of them, so an event recorded there marks them all.
  if (!l.cuda_ok(cudaEventRecord(ready_.get(), cudaStreamLegacy), "cudaEventRecord") ||
      !l.cuda_ok(cudaStreamWaitEvent(l.stream, ready_.get(), 0), "cudaStreamWaitEvent"))
    return l.error;
  if (!op.parts_in.empty()) {
    l.coalesced(keep);
  } else {
    keep = {op.in, op.out};
    switch (op.kind) {
      case OpKind::all_gather:
      case OpKind::reduce_scatter:
      case OpKind::all_reduce: l.reduction(op.out, op.in); break;
      case OpKind::broadcast:
        l.nccl(ncclBroadcast(op.in.raw(), op.out.raw(), static_cast<size_t>(op.out.nbytes()),
                             ncclUint8, op.peer, l.comm, l.stream),
               "ncclBroadcast");
        break;
      case OpKind::barrier:
        l.nccl(
            ncclAllReduce(scalar_.raw(), scalar_.raw(), 1, ncclFloat32, ncclSum, l.comm, l.stream),
            "ncclAllReduce");
        break;
      case OpKind::all_to_all: l.all_to_all(keep); break;
      case OpKind::send:
      case OpKind::recv:
      case OpKind::send_recv: l.point_to_point(); break;
    }
  }
  l.cuda_ok(cudaEventRecord(done.get(), l.stream), "cudaEventRecord");
  return l.error;
}

std::shared_ptr<const Work::Impl> NcclProcessGroup::submit(Op op) {
  std::shared_ptr<detail::HostWork> state = make_host_work(op);
  state->mark_started();
  Pending pending{.state = state,
                  .index = op.index,
                  .deadline = Clock::now() + timeout(),
                  .timeout = timeout()};
  std::string launch_error;
  {
    std::lock_guard lock(comm_mu_);
    if (comm_.get()) {
      const weft::cuda::DeviceGuard on(device_, op.what);
      pending.done = std::make_shared<Event>(device_, op.what);
      launch_error = launch(op, *pending.done, pending.keep);
    }
  }
  const std::shared_ptr<const Event> done = pending.done;
  if (!launch_error.empty()) {
    // The communicator's state after a failed call is unknown: the group
    // fails as it does on a timeout.
    {
      std::lock_guard lock(pending_mu_);
      pending_.push_back(std::move(pending));
    }
    fail_group(launch_error, op.index);
    return state;
  }
  std::string failed;
  {
    std::lock_guard lock(pending_mu_);
    if (failure_.empty()) {
      pending_.push_back(std::move(pending));
    } else {
      // The group failed while this operation was being queued (or before).
      failed = failure_;
      if (done) aborted_.push_back(std::move(pending));
    }
  }
  if (!failed.empty()) {
    state->finish(std::make_exception_ptr(Error(format("{} failed: {}", op.what, failed))));
    return state;
  }
  pending_cv_.notify_all();
  return std::make_shared<NcclWork>(state, done);
}

void NcclProcessGroup::fail_group(const std::string& cause, int64_t culprit) {
  std::deque<Pending> failed;
  std::string first;
  {
    std::lock_guard lock(pending_mu_);
    // Set before the abort, so that a call that finds no communicator finds the reason.
    if (failure_.empty()) {
      failure_ = format("{}; the NCCL communicator of {} was aborted and the group is unusable",
                        cause, label());
      aborted_at_ = Clock::now();
    }
    first = failure_;
    failed.swap(pending_);
  }
  {
    std::lock_guard lock(comm_mu_);
    comm_.abort();
  }
  for (Pending& p : failed) {
    const std::string message =
        p.index == culprit ? first : format("{} failed: {}", p.state->what(), first);
    p.state->finish(std::make_exception_ptr(Error(message)));
  }
  std::lock_guard lock(pending_mu_);
  for (Pending& p : failed) aborted_.push_back(std::move(p));
}

std::string NcclProcessGroup::async_error() {
  std::lock_guard lock(comm_mu_);
  ncclComm_t c = comm_.get();
  if (!c) return {};
  ncclResult_t async = ncclSuccess;
  const ncclResult_t status = ncclCommGetAsyncError(c, &async);
  if (status != ncclSuccess)
    return format("{} on rank {}: ncclCommGetAsyncError failed: {}", label(), rank(),
                  nccl_error(status, c));
  if (async != ncclSuccess && async != ncclInProgress)
    return format("{} on rank {}: NCCL reported an asynchronous error: {}", label(), rank(),
                  nccl_error(async, c));
  return {};
}

void NcclProcessGroup::watch() {
  // This thread's CUDA calls (event queries) are about the group's device.
  if (const cudaError_t status = cudaSetDevice(device_); status != cudaSuccess)
    fail_group(format("{}: the watchdog's cudaSetDevice({}) failed: {}", label(), device_,
                      cudaGetErrorString(status)),
               -1);
  for (;;) {
    std::vector<Pending> finished;
    std::string cause;
    int64_t culprit = -1;
    {
      std::unique_lock lock(pending_mu_);
      pending_cv_.wait(lock, [&] { return stopping_ || !pending_.empty() || !aborted_.empty(); });
      if (stopping_ && pending_.empty() && aborted_.empty()) return;
      const Clock::time_point now = Clock::now();
      // One stream: operations finish in the order they were queued.
      while (!pending_.empty()) {
        const cudaError_t status = cudaEventQuery(pending_.front().done->get());
        if (status == cudaSuccess) {
          finished.push_back(std::move(pending_.front()));
          pending_.pop_front();
          continue;
        }
        if (status != cudaErrorNotReady) {
          cause =
              format("{} failed on rank {}: CUDA reported {} ({})", pending_.front().state->what(),
                     rank(), cudaGetErrorString(status), cudaGetErrorName(status));
          culprit = pending_.front().index;
        }
        break;
      }
      for (const Pending& p : pending_) {
        if (!cause.empty()) break;
        if (now >= p.deadline) {
          cause = format(
              "{} timed out after {} on rank {}: the GPU did not finish it (a rank that did "
              "not arrive, or a kernel that hangs)",
              p.state->what(), seconds(p.timeout), rank());
          culprit = p.index;
        }
      }
      // Aborted operations release their tensors once their kernels stopped.
      while (!aborted_.empty() &&
             (!aborted_.front().done ||
              cudaEventQuery(aborted_.front().done->get()) != cudaErrorNotReady))
        aborted_.pop_front();
      if (!aborted_.empty() && now >= aborted_at_ + kAbortGrace) {
        // Deliberately leaked: see kAbortGrace.
        for (Pending& p : aborted_) static_cast<void>(new std::vector<Tensor>(std::move(p.keep)));
        aborted_.clear();
      }
    }
    for (Pending& p : finished) p.state->finish(nullptr);
    if (cause.empty()) cause = async_error();
    if (!cause.empty()) fail_group(cause, culprit);
    if (finished.empty()) std::this_thread::sleep_for(kPoll);
  }
}

std::shared_ptr<ProcessGroup> make_group(ncclComm_t comm, int device, std::string name,
                                         std::vector<int> world_ranks, const std::string& what) {
  int rank = 0, size = 0;
  ncclResult_t status = ncclCommUserRank(comm, &rank);
  if (status == ncclSuccess) status = ncclCommCount(comm, &size);
  if (status != ncclSuccess) {
    const std::string message = nccl_error(status, comm);
    ncclCommDestroy(comm);
    WEFT_FAIL("{}: reading the NCCL communicator's rank and size failed: {}", what, message);
  }
  return std::make_shared<NcclProcessGroup>(comm, device, std::move(name), rank, size,
                                            std::move(world_ranks));
}

std::shared_ptr<ProcessGroup> NcclProcessGroup::split(const std::vector<std::vector<int>>& lists,
                                                      int color, int key, const std::string& name) {
  const std::string what = format("new_subgroups_by_enumeration('{}') on {}", name, label());
  // The ranks must agree on the lists, and ncclCommSplit waits for every rank
  // without a timeout of its own: an all-reduce (bounded by the group's
  // timeout) checks both first. It counts as an all_reduce in stats().
  uint64_t hash = 1469598103934665603ull;
  for (const auto& list : lists) {
    for (int r : list) hash = (hash ^ static_cast<uint64_t>(r + 1)) * 1099511628211ull;
    hash = (hash ^ 0xffu) * 1099511628211ull;
  }
  const auto mine = static_cast<int64_t>(hash >> 1);  // -mine cannot overflow
  Tensor agree = Tensor::empty({2}, DType::i64);
  agree.data<int64_t>()[0] = mine;
  agree.data<int64_t>()[1] = -mine;
  Tensor on_device = agree.to(Device::cuda(device_));
  all_reduce(on_device, ReduceOp::max).wait();
  agree = on_device.to(Device::cpu());
  WEFT_CHECK(agree.data<int64_t>()[0] == mine && agree.data<int64_t>()[1] == -mine,
             "{}: the ranks passed different rank lists; every rank must pass the same lists",
             what);
  ncclComm_t sub = nullptr;
  {
    std::lock_guard lock(comm_mu_);
    WEFT_CHECK(comm_.get(), "{} failed: the group failed before", what);
    const weft::cuda::DeviceGuard on(device_, what);
    check_nccl(
        ncclCommSplit(comm_.get(), color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &sub, nullptr),
        comm_.get(), what, "ncclCommSplit");
  }
  if (color < 0) return nullptr;
  std::vector<int> ranks;
  for (int r : lists[static_cast<size_t>(color)])
    ranks.push_back(world_ranks()[static_cast<size_t>(r)]);
  return make_group(sub, device_, name, std::move(ranks), what);
}

}  // namespace

std::shared_ptr<ProcessGroup> nccl_world_of_one(int device) {
  const std::string what = format("creating an nccl world of one rank on cuda:{}", device);
  cuda::check_device(Device::cuda(device));
  const weft::cuda::DeviceGuard on(device, what);
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitAll(&comm, 1, &device), nullptr, what, "ncclCommInitAll");
  return make_group(comm, device, "world", {0}, what);
}

std::shared_ptr<ProcessGroup> nccl_world_over(ProcessGroup& bootstrap) {
  const std::string what = format("creating an nccl world over group '{}'", bootstrap.name());
  WEFT_CHECK(bootstrap.backend() != "nccl",
             "{}: bootstrap over a host group (local or mpi), not an nccl one", what);
  // This rank's index among the ranks on its host picks its GPU.
  constexpr int64_t kHostBytes = 256;
  Tensor host = Tensor::zeros({kHostBytes}, DType::u8);
  WEFT_CHECK(gethostname(static_cast<char*>(host.raw()), kHostBytes - 1) == 0,
             "{}: gethostname failed: {}", what, std::strerror(errno));
  Tensor hosts = Tensor::empty({kHostBytes * bootstrap.size()}, DType::u8);
  bootstrap.all_gather(hosts, host).wait();
  int local = 0;
  for (int p = 0; p < bootstrap.rank(); ++p)
    if (std::memcmp(static_cast<const char*>(hosts.raw()) + p * kHostBytes, host.raw(),
                    kHostBytes) == 0)
      ++local;
  const int count = cuda::device_count();
  WEFT_CHECK(count > 0, "{}: {}", what, cuda::unavailable_reason());
  // The GPUs this process sees, one per rank of the host in turn (a launcher
  // that gives each rank its own GPU through CUDA_VISIBLE_DEVICES shows each
  // one GPU: index 0 everywhere).
  const int device = local % count;
  // NCCL refuses two ranks on one GPU: compare the GPUs' PCI bus ids on each
  // host and say so, on every rank, before NCCL fails obscurely.
  constexpr int64_t kBusBytes = 32;
  Tensor bus = Tensor::zeros({kBusBytes}, DType::u8);
  WEFT_CUDA_CHECK(cudaDeviceGetPCIBusId(static_cast<char*>(bus.raw()), kBusBytes - 1, device),
                  what);
  Tensor buses = Tensor::empty({kBusBytes * bootstrap.size()}, DType::u8);
  bootstrap.all_gather(buses, bus).wait();
  const auto at = [](const Tensor& t, int64_t bytes, int p) {
    return static_cast<const char*>(t.raw()) + p * bytes;
  };
  std::string shared;
  for (int p = 0; p < bootstrap.size() && shared.empty(); ++p) {
    for (int q = p + 1; q < bootstrap.size(); ++q) {
      if (std::memcmp(at(hosts, kHostBytes, p), at(hosts, kHostBytes, q), kHostBytes) == 0 &&
          std::memcmp(at(buses, kBusBytes, p), at(buses, kBusBytes, q), kBusBytes) == 0) {
        shared = format("ranks {} and {} on host {} both use the GPU at PCI {}", p, q,
                        at(hosts, kHostBytes, p), at(buses, kBusBytes, p));
        break;
      }
    }
  }
  WEFT_CHECK(shared.empty(),
             "{}: {}; NCCL takes one GPU per rank: start at most as many ranks per host as it "
             "has GPUs (mpirun --map-by ppr:<GPUs>:node)",
             what, shared);

  ncclUniqueId id{};
  Tensor id_bytes = Tensor::zeros({static_cast<int64_t>(sizeof(id))}, DType::u8);
  if (bootstrap.rank() == 0) {
    check_nccl(ncclGetUniqueId(&id), nullptr, what, "ncclGetUniqueId");
    std::memcpy(id_bytes.raw(), &id, sizeof(id));
  }
  bootstrap.broadcast(id_bytes, 0).wait();
  std::memcpy(&id, id_bytes.raw(), sizeof(id));
  const weft::cuda::DeviceGuard on(device, what);
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, bootstrap.size(), id, bootstrap.rank()), nullptr, what,
             "ncclCommInitRank");
  return make_group(comm, device, bootstrap.name(), bootstrap.world_ranks(), what);
}

std::shared_ptr<ProcessGroup> nccl_world() {
  if (!launched_by_mpi()) return nccl_world_of_one(0);
  std::shared_ptr<ProcessGroup> mpi = mpi_world();
  return nccl_world_over(*mpi);
}

}  // namespace weft::comm
