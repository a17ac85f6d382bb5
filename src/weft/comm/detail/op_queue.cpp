#include "weft/comm/detail/op_queue.h"

namespace weft::comm::detail {

OpQueue::OpQueue(int rank, int size, Execute execute, std::chrono::milliseconds idle_period,
                 std::function<void()> idle)
    : rank_(rank),
      size_(size),
      execute_(std::move(execute)),
      idle_period_(idle_period),
      idle_(std::move(idle)),
      tracker_(&MemoryTracker::current()) {}

OpQueue::~OpQueue() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OpQueue::push(Op op, std::shared_ptr<HostWork> work) {
  {
    std::lock_guard lock(mu_);
    queue_.emplace_back(std::move(op), std::move(work));
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  cv_.notify_one();
}

void OpQueue::loop() {
  ScopedMemoryTracker tracker(*tracker_);
  ScopedMemoryTag tag(MemoryTag::comm);
  std::unique_lock lock(mu_);
  for (;;) {
    if (queue_.empty()) {
      if (stop_) return;
      if (idle_ && idle_period_.count() > 0) {
        if (!cv_.wait_for(lock, idle_period_, [&] { return stop_ || !queue_.empty(); })) {
          lock.unlock();
          idle_();
          lock.lock();
        }
      } else {
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      }
      continue;
    }
    auto [op, work] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    work->mark_started();
    std::exception_ptr error;
    try {
      const bool coalesced = !op.parts_in.empty();
      if (coalesced) pack_coalesced(op, rank_, size_);
      execute_(op);
      if (coalesced) unpack_coalesced(op, size_);
    } catch (...) {
      error = std::current_exception();
    }
    op = Op();  // release the tensors before the Work reports completion
    work->finish(std::move(error));
    lock.lock();
  }
}

}  // namespace weft::comm::detail
