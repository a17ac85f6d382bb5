// Work: the handle every collective returns.
//
// A Work is done when its operation finished on this rank, successfully or
// not. wait() rethrows the operation's error; a wait that runs past its
// timeout throws a weft::Error naming the group, the operation and, where the
// backend can tell, the ranks that have not arrived. Copies share state, and a
// default-constructed Work is already complete (used for no-op calls).
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "weft/core/tensor.h"

namespace weft::comm {

namespace detail {

// Shared between the Work handles and the group's worker thread.
struct WorkState {
  std::string what;  // "all_gather #3 on group 'tp'"
  int rank = 0;      // the rank of the group that issued it
  std::chrono::milliseconds group_timeout{0};
  // Describes which ranks have not reached this operation; called on a wait
  // timeout. May be empty.
  std::function<std::string()> stragglers;
  // The tensors stay alive until the operation is done.
  Tensor keep_in, keep_out;

  std::mutex mu;
  std::condition_variable cv;
  bool started = false;
  bool done = false;
  std::chrono::steady_clock::time_point start_time;
  std::exception_ptr error;

  void mark_started();
  void finish(std::exception_ptr err);
};

}  // namespace detail

class Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<detail::WorkState> state) : state_(std::move(state)) {}

  // Whether the operation finished (successfully or with an error).
  bool is_completed() const;
  // Waits until the operation finishes and rethrows its error. Bounded by the
  // group's timeout, counted from when the operation started on this rank.
  void wait() const;
  // Waits at most `timeout`; throws weft::Error if the operation is still running.
  void wait(std::chrono::milliseconds timeout) const;
  // The operation's error once it finished with one; null otherwise.
  std::exception_ptr error() const;
  // "all_gather #3 on group 'tp'" (empty for a default-constructed Work).
  std::string what() const;

 private:
  std::shared_ptr<detail::WorkState> state_;
};

// Waits for every Work in order; the first error is rethrown after all of them finished.
void wait_all(const std::vector<Work>& works);

}  // namespace weft::comm
