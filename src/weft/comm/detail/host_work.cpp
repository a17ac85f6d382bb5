#include "weft/comm/detail/host_work.h"

#include <algorithm>

#include "weft/core/error.h"
#include "weft/core/profile.h"

namespace weft::comm::detail {

void ObserverSlot::set(CommObserver observer) {
  std::shared_ptr<const CommObserver> next;
  if (observer) next = std::make_shared<const CommObserver>(std::move(observer));
  std::lock_guard lock(mu_);
  active_.store(next != nullptr, std::memory_order_release);
  observer_ = std::move(next);
}

void ObserverSlot::emit(CommEvent::Kind kind, OpKind op, int64_t index,
                        const std::string& what) const {
  if (!active()) return;
  std::shared_ptr<const CommObserver> observer;
  {
    std::lock_guard lock(mu_);
    observer = observer_;
  }
  if (observer) (*observer)(CommEvent{.kind = kind, .op = op, .index = index, .what = what});
}

HostWork::HostWork(std::string what, OpKind kind, int64_t index, int rank,
                   std::chrono::milliseconds group_timeout,
                   std::shared_ptr<const ObserverSlot> observer)
    : what_(std::move(what)),
      kind_(kind),
      index_(index),
      rank_(rank),
      group_timeout_(group_timeout),
      observer_(std::move(observer)) {}

void HostWork::mark_started() {
  std::lock_guard lock(mu_);
  started_ = true;
  start_time_ = std::chrono::steady_clock::now();
}

void HostWork::finish(std::exception_ptr err) {
  // Reported before the Work is done, so that no wait on it returns first.
  observer_->emit(CommEvent::Kind::completed, kind_, index_, what_);
  {
    std::lock_guard lock(mu_);
    done_ = true;
    error_ = std::move(err);
  }
  cv_.notify_all();
}

bool HostWork::completed() const {
  std::lock_guard lock(mu_);
  return done_;
}

std::exception_ptr HostWork::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

namespace {

std::string seconds(std::chrono::milliseconds ms) {
  return format("{} s", static_cast<double>(ms.count()) / 1000.0);
}

// Reports wait_begin on construction and wait_end on destruction, also when
// the wait throws.
class WaitEvents {
 public:
  WaitEvents(const ObserverSlot& slot, OpKind kind, int64_t index, const std::string& what)
      : slot_(slot.active() ? &slot : nullptr), kind_(kind), index_(index), what_(what) {
    if (slot_) slot_->emit(CommEvent::Kind::wait_begin, kind_, index_, what_);
  }
  ~WaitEvents() {
    if (slot_) slot_->emit(CommEvent::Kind::wait_end, kind_, index_, what_);
  }
  WaitEvents(const WaitEvents&) = delete;
  WaitEvents& operator=(const WaitEvents&) = delete;

 private:
  const ObserverSlot* slot_;
  OpKind kind_;
  int64_t index_;
  const std::string& what_;
};

}  // namespace

void HostWork::throw_timeout(std::chrono::milliseconds waited) const {
  std::string who = stragglers ? stragglers() : std::string();
  WEFT_FAIL("{} did not complete within {} on rank {}{}{}", what_, seconds(waited), rank_,
            who.empty() ? "" : ": ", who);
}

void HostWork::wait() const {
  WaitEvents events(*observer_, kind_, index_, what_);
  profile::Scope blocked(profile::Category::comm);
  // The worker enforces the group timeout on each operation it runs and fails
  // the Work itself with a richer message; the grace keeps that message first.
  const auto grace = std::chrono::seconds(5);
  const auto call = std::chrono::steady_clock::now();
  std::unique_lock lock(mu_);
  for (;;) {
    if (done_) break;
    auto deadline = call + group_timeout_ + grace;
    if (started_) deadline = std::max(deadline, start_time_ + group_timeout_ + grace);
    if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && !done_ &&
        std::chrono::steady_clock::now() >= deadline) {
      lock.unlock();
      throw_timeout(std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - call));
    }
  }
  if (error_) std::rethrow_exception(error_);
}

void HostWork::wait_for(std::chrono::milliseconds timeout) const {
  WaitEvents events(*observer_, kind_, index_, what_);
  profile::Scope blocked(profile::Category::comm);
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return done_; })) {
    lock.unlock();
    throw_timeout(timeout);
  }
  if (error_) std::rethrow_exception(error_);
}

}  // namespace weft::comm::detail
