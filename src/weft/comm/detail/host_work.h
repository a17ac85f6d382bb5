// HostWork: the Work::Impl of the host backends (local, mpi), finished by the
// group's worker thread (OpQueue) when the operation ran on this rank.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "weft/comm/process_group.h"
#include "weft/comm/work.h"

namespace weft::comm::detail {

// A group's observer, shared with the Works it issued (which may outlive it).
// Delivering an event costs one atomic load while none is set.
class ObserverSlot {
 public:
  void set(CommObserver observer);
  bool active() const { return active_.load(std::memory_order_acquire); }
  // Calls the observer, if any, on the calling thread (not under a lock, so
  // the observer may call into the group).
  void emit(CommEvent::Kind kind, OpKind op, int64_t index, const std::string& what) const;

 private:
  std::atomic<bool> active_{false};
  mutable std::mutex mu_;
  std::shared_ptr<const CommObserver> observer_;
};

class HostWork final : public Work::Impl {
 public:
  HostWork(std::string what, OpKind kind, int64_t index, int rank,
           std::chrono::milliseconds group_timeout, std::shared_ptr<const ObserverSlot> observer);

  // Describes which ranks have not reached this operation; called on a wait
  // timeout. The backend sets it (before the operation is queued); may be empty.
  std::function<std::string()> stragglers;

  // The worker's side.
  void mark_started();
  void finish(std::exception_ptr err);

  bool completed() const override;
  void wait() const override;
  void wait_for(std::chrono::milliseconds timeout) const override;
  std::exception_ptr error() const override;
  std::string what() const override { return what_; }

 private:
  [[noreturn]] void throw_timeout(std::chrono::milliseconds waited) const;

  const std::string what_;  // "all_gather #3 on group 'tp'"
  const OpKind kind_;
  const int64_t index_;
  const int rank_;  // the rank of the group that issued it
  const std::chrono::milliseconds group_timeout_;
  const std::shared_ptr<const ObserverSlot> observer_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool started_ = false;
  bool done_ = false;
  std::chrono::steady_clock::time_point start_time_;
  std::exception_ptr error_;
};

}  // namespace weft::comm::detail
