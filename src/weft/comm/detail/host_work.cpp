#include "weft/comm/work.h"

#include <algorithm>
#include <vector>

#include "weft/core/error.h"
#include "weft/core/profile.h"

namespace weft::comm {

namespace detail {

void WorkState::mark_started() {
  std::lock_guard lock(mu);
  started = true;
  start_time = std::chrono::steady_clock::now();
}

void WorkState::finish(std::exception_ptr err) {
  {
    std::lock_guard lock(mu);
    done = true;
    error = std::move(err);
    keep_in = Tensor();
    keep_out = Tensor();
  }
  cv.notify_all();
}

}  // namespace detail

bool Work::is_completed() const {
  if (!state_) return true;
  std::lock_guard lock(state_->mu);
  return state_->done;
}

std::exception_ptr Work::error() const {
  if (!state_) return nullptr;
  std::lock_guard lock(state_->mu);
  return state_->error;
}

std::string Work::what() const { return state_ ? state_->what : std::string(); }

namespace {

std::string seconds(std::chrono::milliseconds ms) {
  return format("{} s", static_cast<double>(ms.count()) / 1000.0);
}

[[noreturn]] void throw_timeout(detail::WorkState& s, std::chrono::milliseconds waited) {
  std::string who = s.stragglers ? s.stragglers() : std::string();
  WEFT_FAIL("{} did not complete within {} on rank {}{}{}", s.what, seconds(waited), s.rank,
            who.empty() ? "" : ": ", who);
}

}  // namespace

void Work::wait() const {
  if (!state_) return;
  profile::Scope blocked(profile::Category::comm);
  detail::WorkState& s = *state_;
  // The worker enforces the group timeout on each operation it runs and fails
  // the Work itself with a richer message; the grace keeps that message first.
  const auto grace = std::chrono::seconds(5);
  const auto call = std::chrono::steady_clock::now();
  std::unique_lock lock(s.mu);
  for (;;) {
    if (s.done) break;
    auto deadline = call + s.group_timeout + grace;
    if (s.started) deadline = std::max(deadline, s.start_time + s.group_timeout + grace);
    if (s.cv.wait_until(lock, deadline) == std::cv_status::timeout && !s.done &&
        std::chrono::steady_clock::now() >= deadline) {
      lock.unlock();
      throw_timeout(s, std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - call));
    }
  }
  if (s.error) std::rethrow_exception(s.error);
}

void Work::wait(std::chrono::milliseconds timeout) const {
  if (!state_) return;
  profile::Scope blocked(profile::Category::comm);
  detail::WorkState& s = *state_;
  std::unique_lock lock(s.mu);
  if (!s.cv.wait_for(lock, timeout, [&] { return s.done; })) {
    lock.unlock();
    throw_timeout(s, timeout);
  }
  if (s.error) std::rethrow_exception(s.error);
}

void wait_all(const std::vector<Work>& works) {
  std::exception_ptr first;
  for (const Work& w : works) {
    try {
      w.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace weft::comm
