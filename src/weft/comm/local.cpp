#include "weft/comm/local.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "weft/comm/detail/local_state.h"
#include "weft/comm/detail/op_queue.h"
#include "weft/comm/detail/reduce.h"
#include "weft/core/cuda.h"
#include "weft/core/error.h"
#include "weft/core/threads.h"

#if WEFT_HAVE_CUDA
#include "weft/comm/cuda/reduce.h"
#endif

namespace weft::comm {

namespace {

using Clock = std::chrono::steady_clock;
using detail::copy_on;
using detail::LocalShared;
using detail::LocalWorld;
using detail::Op;
using detail::PeerFailure;
using detail::settle;

std::string seconds(std::chrono::milliseconds ms) {
  return format("{} s", static_cast<double>(ms.count()) / 1000.0);
}

char* bytes_of(const Tensor& t) { return static_cast<char*>(t.raw()); }

// How a collective moves and combines the bytes of its device `d`: host
// memory through detail/, a GPU's memory (every rank a thread on the same GPU)
// through the CUDA runtime.
//
// Ordering on a GPU, the simplest correct scheme: the worker copies with
// cudaMemcpy and reduces with kernels on the legacy default stream, and
// settle() waits for that stream before the worker tells its peers (or the
// caller) that it is done. weft's streams are blocking streams, so the legacy
// stream's work runs after every kernel already queued on any rank's stream
// (the producers of the inputs, queued before the collective was issued) and
// before any queued later (the consumers, queued after Work::wait). Nothing
// overlaps with compute yet, but no event or stream handle crosses threads.
void copy_to_many_on(Device d, std::span<void* const> dsts, const void* src, int64_t bytes) {
  if (d.is_cpu()) return detail::copy_to_many(dsts, src, bytes);
  for (void* dst : dsts) copy_on(d, dst, src, bytes);
}

void reduce_on(Device d, DType dtype, ReduceOp op, void* out, std::span<const void* const> inputs,
               int64_t count, int divisor) {
  if (d.is_cpu()) return detail::reduce_buffers(dtype, op, out, inputs, count, divisor);
#if WEFT_HAVE_CUDA
  gpu::reduce_buffers(d, dtype, op, out, inputs, count, divisor);
#else
  WEFT_FAIL("cannot reduce tensors on {}: {}", d, weft::cuda::unavailable_reason());
#endif
}

// all_gather: large chunks are pushed into every output, reading this rank's
// chunk once; small ones are pulled, so that they land in this rank's caches.
void all_gather_from(const Op& op, const std::vector<Op>& peers, int me, Device dev) {
  const int n = static_cast<int>(peers.size());
  const int64_t chunk = op.in.nbytes();
  if (chunk >= detail::kStreamingBytes) {
    std::vector<void*> dsts;
    for (int i = 0; i < n; ++i) {
      int p = (me + i) % n;  // start with a different peer on every rank
      if (p != me || !op.in_place)
        dsts.push_back(bytes_of(peers[static_cast<size_t>(p)].out) + me * chunk);
    }
    copy_to_many_on(dev, dsts, op.in.raw(), chunk);
    return;
  }
  for (int i = 0; i < n; ++i) {
    int p = (me + i) % n;
    if (p == me && op.in_place) continue;
    copy_on(dev, bytes_of(op.out) + p * chunk, peers[static_cast<size_t>(p)].in.raw(), chunk);
  }
}

class LocalProcessGroup final : public ProcessGroup {
 public:
  LocalProcessGroup(std::shared_ptr<LocalShared> shared, int rank)
      : ProcessGroup(shared->name, rank, shared->size, shared->world_ranks),
        shared_(std::move(shared)),
        queue_(std::make_unique<detail::OpQueue>(rank, shared_->size,
                                                 [this](Op& op) { execute(op); })) {}

  ~LocalProcessGroup() override {
    queue_.reset();  // runs what is still queued
    std::lock_guard lock(shared_->mu);
    shared_->left[static_cast<size_t>(rank())] = true;
    shared_->cv.notify_all();
  }

  std::string_view backend() const override { return "local"; }

 protected:
  std::string unsupported(Device d) const override {
    if (d.is_cpu()) return {};
#if WEFT_HAVE_CUDA
    return {};  // every rank a thread on the same GPU: see copy_on
#else
    return weft::cuda::unavailable_reason();
#endif
  }

  std::shared_ptr<const Work::Impl> submit(Op op) override {
    auto work = make_host_work(op);
    std::weak_ptr<LocalShared> weak = shared_;
    work->stragglers = [weak, kind = op.kind, seq = op.seq, peer = op.peer, src = op.src] {
      auto g = weak.lock();
      if (!g) return std::string();
      std::lock_guard lock(g->mu);
      if (!is_collective(kind)) {
        int who = kind == OpKind::send ? peer : src;
        return format("waiting for rank {}", g->ranks_str({who}));
      }
      const auto& s = g->slots[seq % 2];
      if (s.seq != seq) return std::string("no rank has started it yet");
      auto missing = g->not_arrived(s);
      if (missing.empty()) return std::string("all ranks arrived; it is still running");
      return format("ranks {} did not arrive", g->ranks_str(missing));
    };
    queue_->push(std::move(op), work);
    return work;
  }

  std::shared_ptr<ProcessGroup> split(const std::vector<std::vector<int>>& lists, int color,
                                      int key, const std::string& name) override;

 private:
  void execute(Op& op);
  void collective(Op& op);
  void run_collective(Op& op, LocalShared::Slot& s, std::unique_lock<std::mutex>& lock);
  // all_reduce as reduce-scatter (each rank reduces its part) then all-gather
  // of the parts, with every rank's reduction finished in between.
  void all_reduce_from(const Op& op, const std::vector<Op>& peers, LocalShared::Slot& s,
                       std::unique_lock<std::mutex>& lock);
  void send(const Op& op, const Clock::time_point& deadline);
  void recv(Op& op, const Clock::time_point& deadline);

  // Waits until pred() holds. Before all ranks joined (`joined` false) a group
  // failure or a departed rank ends the wait with an error; afterwards only the
  // deadline does, because peers may still be using this rank's buffers (they
  // hold references to them, so a rank that gives up early frees nothing
  // they read or write).
  template <typename Pred, typename Missing>
  void wait_for(std::unique_lock<std::mutex>& lock, const Op& op, Clock::time_point deadline,
                bool joined, Pred pred, Missing missing, const char* verb);

  std::string disagreement(const LocalShared::Slot& s) const;
  // For all_to_all with variable chunks: what each rank sends must be what
  // its peer expects; the first pair that differs, or empty.
  std::string variable_chunks_disagree(const LocalShared::Slot& s) const;
  void all_to_all_v_from(const Op& op, const std::vector<Op>& peers, Device dev);

  std::shared_ptr<LocalShared> shared_;
  std::unique_ptr<detail::OpQueue> queue_;
};

template <typename Pred, typename Missing>
void LocalProcessGroup::wait_for(std::unique_lock<std::mutex>& lock, const Op& op,
                                 Clock::time_point deadline, bool joined, Pred pred,
                                 Missing missing, const char* verb) {
  LocalShared& g = *shared_;
  while (!pred()) {
    if (!joined) {
      if (!g.failure.empty()) throw PeerFailure(format("{} failed: {}", op.what, g.failure));
      std::vector<int> gone;
      for (int p : missing())
        if (g.left[static_cast<size_t>(p)]) gone.push_back(p);
      if (!gone.empty()) {
        std::string msg = format(
            "{} failed on rank {}: ranks {} left the group (their "
            "ProcessGroup was destroyed) without joining it",
            op.what, rank(), g.ranks_str(gone));
        g.fail(msg);
        throw PeerFailure(msg);
      }
    }
    if (g.cv.wait_until(lock, deadline) == std::cv_status::timeout && !pred()) {
      std::string msg = format("{} timed out after {} on rank {}: ranks {} {}", op.what,
                               seconds(timeout()), rank(), g.ranks_str(missing()), verb);
      g.fail(msg);
      throw Error(msg);
    }
  }
}

void LocalProcessGroup::execute(Op& op) {
  const Clock::time_point deadline = Clock::now() + timeout();
  if (is_collective(op.kind)) return collective(op);
  {
    std::lock_guard lock(shared_->mu);
    if (!shared_->failure.empty()) {
      throw PeerFailure(format("{} failed: {}", op.what, shared_->failure));
    }
  }
  if (op.kind == OpKind::send) return send(op, deadline);
  if (op.kind == OpKind::recv) return recv(op, deadline);
  // send_recv: post the send first so that a ring of send_recv calls progresses.
  LocalShared& g = *shared_;
  LocalShared::Posting post{.op = &op};
  auto& box = g.boxes[static_cast<size_t>(rank() * g.size + op.peer)];
  {
    std::lock_guard lock(g.mu);
    box.push_back(&post);
    g.cv.notify_all();
  }
  std::exception_ptr recv_error;
  try {
    recv(op, deadline);
  } catch (...) {
    recv_error = std::current_exception();
  }
  std::unique_lock lock(g.mu);
  auto it = std::find(box.begin(), box.end(), &post);
  if (recv_error && it != box.end()) {
    box.erase(it);  // never taken: nobody reads this buffer
    std::rethrow_exception(recv_error);
  }
  wait_for(
      lock, op, deadline, post.taken, [&] { return post.done; },
      [&] { return std::vector<int>{op.peer}; }, "did not receive the send");
  if (recv_error) std::rethrow_exception(recv_error);
}

void LocalProcessGroup::send(const Op& op, const Clock::time_point& deadline) {
  LocalShared& g = *shared_;
  LocalShared::Posting post{.op = &op};
  auto& box = g.boxes[static_cast<size_t>(rank() * g.size + op.peer)];
  std::unique_lock lock(g.mu);
  box.push_back(&post);
  g.cv.notify_all();
  try {
    wait_for(
        lock, op, deadline, false, [&] { return post.taken; },
        [&] { return std::vector<int>{op.peer}; }, "did not receive it");
  } catch (...) {
    box.erase(std::find(box.begin(), box.end(), &post));
    throw;
  }
  wait_for(
      lock, op, deadline, true, [&] { return post.done; },
      [&] { return std::vector<int>{op.peer}; }, "did not finish receiving it");
}

void LocalProcessGroup::recv(Op& op, const Clock::time_point& deadline) {
  LocalShared& g = *shared_;
  auto& box = g.boxes[static_cast<size_t>(op.src * g.size + rank())];
  std::unique_lock lock(g.mu);
  wait_for(
      lock, op, deadline, false, [&] { return !box.empty(); },
      [&] { return std::vector<int>{op.src}; }, "did not send");
  LocalShared::Posting* post = box.front();
  box.pop_front();
  post->taken = true;
  // A reference, taken under the lock: a sender that gives up waiting (a
  // timeout) may drop its tensor while this copy still reads it.
  const Tensor in = post->op->in;
  lock.unlock();
  std::string error;
  if (in.dtype() != op.out.dtype() || in.nbytes() != op.out.nbytes()) {
    error = format(
        "{} on rank {}: rank {} sent {} {} elements ({}) but this rank receives {} {} "
        "elements ({})",
        op.what, rank(), op.src, in.numel(), dtype_name(in.dtype()), in.shape(), op.out.numel(),
        dtype_name(op.out.dtype()), op.out.shape());
  } else if (in.device() != op.out.device()) {
    error = format("{} on rank {}: rank {} sent a tensor on {} but this rank receives on {}",
                   op.what, rank(), op.src, in.device(), op.out.device());
  } else {
    copy_on(op.out.device(), op.out.raw(), in.raw(), in.nbytes());
    settle(op.out.device());
  }
  // Like MPI, a mismatch fails the receiver only; the sender's message was consumed.
  lock.lock();
  post->done = true;
  g.cv.notify_all();
  if (!error.empty()) throw Error(error);
}

void LocalProcessGroup::collective(Op& op) {
  LocalShared& g = *shared_;
  const Clock::time_point deadline = Clock::now() + timeout();
  // In place, every peer reads chunks of this rank's buffer that this rank
  // overwrites: publish a private copy of the input instead.
  if (op.kind == OpKind::all_to_all && op.in_place && g.size > 1) {
    op.in = op.in.clone();
    settle(op.in.device());
  }
  LocalShared::Slot& s = g.slots[op.seq % 2];
  std::unique_lock lock(g.mu);
  if (!g.failure.empty()) throw PeerFailure(format("{} failed: {}", op.what, g.failure));
  if (s.seq != op.seq) s = LocalShared::Slot{.seq = op.seq, .ops = std::vector<Op*>(g.size)};
  s.ops[static_cast<size_t>(rank())] = &op;
  ++s.arrived;
  g.cv.notify_all();
  // A wait that fails here has failed the group first, so the slot can never
  // complete and nobody reads the buffers this rank published.
  wait_for(
      lock, op, deadline, false, [&] { return s.arrived == g.size; },
      [&] { return g.not_arrived(s); }, "did not arrive");
  std::string mismatch = disagreement(s);
  if (mismatch.empty()) {
    run_collective(op, s, lock);
  }
  ++s.done;
  g.cv.notify_all();
  wait_for(
      lock, op, deadline, true, [&] { return s.done == g.size; },
      [&] {
        std::vector<int> out;
        for (int p = 0; p < g.size; ++p) out.push_back(p);
        return out;
      },
      "did not finish");
  if (!mismatch.empty()) {
    g.fail(mismatch);
    throw Error(mismatch);
  }
}

std::string LocalProcessGroup::disagreement(const LocalShared::Slot& s) const {
  auto describe = [](const Op& o) {
    std::string text(op_kind_name(o.kind));
    if (o.kind == OpKind::barrier) return text;
    const Tensor& t = o.kind == OpKind::all_gather ? o.in : o.out;
    if (o.recv_bytes.empty()) {
      text += format(" of {} {}", t.numel(), dtype_name(t.dtype()));
    } else {
      text += format(" with variable chunks of {}", dtype_name(t.dtype()));
    }
    if (!t.device().is_cpu()) text += format(" on {}", t.device());
    if (o.kind == OpKind::all_reduce || o.kind == OpKind::reduce_scatter)
      text += format(" ({})", reduce_op_name(o.reduce));
    if (o.kind == OpKind::broadcast) text += format(" from root {}", o.peer);
    if (!o.parts_in.empty()) text += format(" coalesced from {} tensors", o.parts_in.size());
    return text;
  };
  const std::string first = describe(*s.ops[0]);
  bool same = true;
  for (const Op* o : s.ops) same = same && describe(*o) == first;
  if (same && !s.ops[0]->recv_bytes.empty()) return variable_chunks_disagree(s);
  if (same) return {};
  std::string text;
  for (size_t p = 0; p < s.ops.size(); ++p)
    text += format("{}rank {}: {}", p ? ", " : "", p, describe(*s.ops[p]));
  return format(
      "{}: the ranks disagree about the operation ({}); every rank must make the same "
      "collective calls in the same order with the same sizes and types",
      s.ops[static_cast<size_t>(rank())]->what, text);
}

std::string LocalProcessGroup::variable_chunks_disagree(const LocalShared::Slot& s) const {
  const size_t n = s.ops.size();
  for (size_t p = 0; p < n; ++p) {
    for (size_t q = 0; q < n; ++q) {
      const int64_t sent = s.ops[p]->send_bytes[q], expected = s.ops[q]->recv_bytes[p];
      if (sent == expected) continue;
      return format(
          "{}: rank {} sends {} bytes to rank {}, which expects {}; every rank's output row "
          "counts must equal what the other ranks send it (exchange the counts first)",
          s.ops[static_cast<size_t>(rank())]->what, p, sent, q, expected);
    }
  }
  return {};
}

void LocalProcessGroup::all_reduce_from(const Op& op, const std::vector<Op>& peers,
                                        LocalShared::Slot& s, std::unique_lock<std::mutex>& lock) {
  const int n = size(), me = rank();
  const Device dev = op.in.device();
  const int64_t count = op.in.numel();
  const int64_t elem = dtype_bits(op.in.dtype()) / 8;
  const auto part = [&](int p) { return count * p / n; };
  const int64_t begin = part(me), len = part(me + 1) - begin;
  std::vector<const void*> inputs;
  for (int p = 0; p < n; ++p)
    inputs.push_back(bytes_of(peers[static_cast<size_t>(p)].in) + begin * elem);
  reduce_on(dev, op.in.dtype(), op.reduce, bytes_of(op.out) + begin * elem, inputs, len, n);
  settle(dev);  // peers copy this part of the result next
  lock.lock();
  ++s.reduced;
  shared_->cv.notify_all();
  wait_for(
      lock, op, Clock::now() + timeout(), true, [&] { return s.reduced == n; },
      [&] {
        std::vector<int> out;
        for (int p = 0; p < n; ++p) out.push_back(p);
        return out;
      },
      "did not finish the reduction");
  lock.unlock();
  for (int i = 1; i < n; ++i) {
    int p = (me + i) % n;
    const int64_t b = part(p);
    copy_on(dev, bytes_of(op.out) + b * elem,
            bytes_of(peers[static_cast<size_t>(p)].out) + b * elem, (part(p + 1) - b) * elem);
  }
}

void LocalProcessGroup::all_to_all_v_from(const Op& op, const std::vector<Op>& peers, Device dev) {
  const int n = size(), me = rank();
  std::vector<int64_t> at(static_cast<size_t>(n) + 1, 0);  // where rank p's rows land
  for (int p = 0; p < n; ++p) at[p + 1] = at[p] + op.recv_bytes[static_cast<size_t>(p)];
  for (int i = 0; i < n; ++i) {
    const int p = (me + i) % n;
    const std::vector<int64_t>& sent = peers[static_cast<size_t>(p)].send_bytes;
    int64_t from = 0;  // where rank p's rows for this rank start in its input
    for (int q = 0; q < me; ++q) from += sent[static_cast<size_t>(q)];
    const int64_t len = at[p + 1] - at[p];
    if (len > 0)
      copy_on(dev, bytes_of(op.out) + at[p], bytes_of(peers[static_cast<size_t>(p)].in) + from,
              len);
  }
}

void LocalProcessGroup::run_collective(Op& op, LocalShared::Slot& s,
                                       std::unique_lock<std::mutex>& lock) {
  const int n = size(), me = rank();
  // Peers read this rank's buffers and write into its all_gather output. If
  // a rank gives up waiting (a timeout) while a slow peer is still at work,
  // its caller may drop its tensors: each rank holds references to the
  // buffers of all ranks, taken under the lock, until it is done with them.
  std::vector<Op> held;
  held.reserve(static_cast<size_t>(n));
  for (const Op* o : s.ops)
    held.push_back(Op{.in = o->in, .out = o->out, .send_bytes = o->send_bytes});
  const auto peer = [&](int p) -> const Op& { return held[static_cast<size_t>(p)]; };
  // Every rank's tensors are on this device: disagreement() compared them.
  const Device dev = op.in.defined() ? op.in.device() : Device::cpu();
  lock.unlock();
  switch (op.kind) {
    case OpKind::all_gather: all_gather_from(op, held, me, dev); break;
    case OpKind::reduce_scatter: {
      const int64_t count = op.out.numel(), chunk = op.out.nbytes();
      std::vector<const void*> inputs;
      for (int p = 0; p < n; ++p) inputs.push_back(bytes_of(peer(p).in) + me * chunk);
      reduce_on(dev, op.in.dtype(), op.reduce, op.out.raw(), inputs, count, n);
      break;
    }
    case OpKind::all_reduce: all_reduce_from(op, held, s, lock); break;
    case OpKind::broadcast: {
      const Op& root = peer(op.peer);
      if (me != op.peer || !op.in_place) copy_on(dev, op.out.raw(), root.in.raw(), op.out.nbytes());
      break;
    }
    case OpKind::all_to_all: {
      if (!op.recv_bytes.empty()) {
        all_to_all_v_from(op, held, dev);
        break;
      }
      const int64_t chunk = op.in.nbytes() / n;
      for (int i = 0; i < n; ++i) {
        int p = (me + i) % n;
        copy_on(dev, bytes_of(op.out) + p * chunk, bytes_of(peer(p).in) + me * chunk, chunk);
      }
      break;
    }
    default: break;  // barrier: arriving is all it does
  }
  settle(dev);
  lock.lock();
}

std::shared_ptr<ProcessGroup> LocalProcessGroup::split(const std::vector<std::vector<int>>& lists,
                                                       int color, int key,
                                                       const std::string& name) {
  LocalShared& g = *shared_;
  std::vector<std::shared_ptr<LocalShared>> created;
  std::shared_ptr<LocalShared> mine;
  {
    std::lock_guard lock(g.mu);
    int64_t call = g.splits_done[static_cast<size_t>(rank())]++;
    auto [it, fresh] = g.splits.try_emplace(call);
    LocalShared::Split& sp = it->second;
    if (fresh) {
      sp.lists = lists;
      for (size_t i = 0; i < lists.size(); ++i) {
        std::vector<int> ranks;
        for (int r : lists[i]) ranks.push_back(g.world_ranks[static_cast<size_t>(r)]);
        sp.groups.push_back(std::make_shared<LocalShared>(g.world, name, std::move(ranks)));
      }
      created = sp.groups;
    }
    WEFT_CHECK(sp.lists == lists,
               "new_subgroups_by_enumeration('{}') on group '{}': rank {} passed different rank "
               "lists than the rank that called it first; every rank must pass the same lists",
               name, g.name, rank());
    if (color >= 0) mine = sp.groups[static_cast<size_t>(color)];
    if (++sp.taken == g.size) g.splits.erase(it);
  }
  for (auto& c : created) g.world->add(c);
  if (!mine) return nullptr;
  return std::make_shared<LocalProcessGroup>(mine, key);
}

}  // namespace

std::shared_ptr<ProcessGroup> local_world_of_one() {
  auto world = std::make_shared<LocalWorld>();
  auto shared = std::make_shared<LocalShared>(world, "world", std::vector<int>{0});
  world->add(shared);
  return std::make_shared<LocalProcessGroup>(shared, 0);
}

void run_local(int n, const std::function<void(ProcessGroup& world)>& fn) {
  WEFT_CHECK(n >= 1, "run_local needs at least one rank, got {}", n);
  auto world = std::make_shared<LocalWorld>();
  std::vector<int> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) ranks[static_cast<size_t>(r)] = r;
  auto shared = std::make_shared<LocalShared>(world, "world", ranks);
  world->add(shared);
  const int previous_ranks = ranks_in_process();
  set_ranks_in_process(n);
  std::vector<std::unique_ptr<MemoryTracker>> trackers;
  for (int r = 0; r < n; ++r) trackers.push_back(std::make_unique<MemoryTracker>());
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ScopedMemoryTracker tracker(*trackers[static_cast<size_t>(r)]);
      // The abort must precede the group's destruction, or peers would first
      // see this rank leave and report that instead of its error.
      try {
        LocalProcessGroup group(shared, r);
        try {
          fn(group);
        } catch (...) {
          world->abort(r, std::current_exception());
        }
      } catch (...) {
        world->abort(r, std::current_exception());
      }
    });
  }
  for (auto& t : threads) t.join();
  set_ranks_in_process(previous_ranks);
  if (world->first_error) std::rethrow_exception(world->first_error);
}

}  // namespace weft::comm
