#include "weft/comm/op_queue.h"

namespace weft::comm::detail {

OpQueue::OpQueue(Execute execute, std::chrono::milliseconds idle_period, std::function<void()> idle)
    : execute_(std::move(execute)),
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

void OpQueue::push(Op op, std::shared_ptr<WorkState> state) {
  {
    std::lock_guard lock(mu_);
    queue_.emplace_back(std::move(op), std::move(state));
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
    auto [op, state] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    state->mark_started();
    std::exception_ptr error;
    try {
      execute_(op);
    } catch (...) {
      error = std::current_exception();
    }
    op = Op();  // release the tensors before the Work reports completion
    state->finish(std::move(error));
    lock.lock();
  }
}

}  // namespace weft::comm::detail
