// Work: the handle every collective returns.
//
// A Work is done when its operation finished on this rank, successfully or
// not. wait() rethrows the operation's error; a wait that runs past its
// timeout throws a weft::Error naming the group, the operation and, where the
// backend can tell, the ranks that have not arrived. Copies share the
// operation, and a default-constructed Work is already complete (used for
// no-op calls).
//
// The handle is the same for every backend; what it refers to is a Work::Impl,
// which each provides: the host backends (local, mpi) one finished by the
// group's worker thread, a CUDA backend one recorded as an event on its stream.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace weft {
class ExecContext;
}

namespace weft::comm {

class Work {
 public:
  // One operation (or a group of operations completing together) as its
  // backend tracks it. Every wait is bounded: an implementation without a
  // timeout of its own is a bug (hangs are bugs).
  class Impl {
   public:
    virtual ~Impl() = default;
    // Whether the operation finished (successfully or with an error).
    virtual bool completed() const = 0;
    // Waits until it finished, bounded by the operation's own timeout (its
    // group's), and rethrows its error.
    virtual void wait() const = 0;
    // Waits at most `timeout`; throws weft::Error if it is still running.
    virtual void wait_for(std::chrono::milliseconds timeout) const = 0;
    // Orders work later queued on `context` after the operation. The default,
    // for host backends, is wait(): CPU kernels run on the calling thread.
    virtual void wait_on(const ExecContext& context) const;
    // The error once it finished with one; null otherwise.
    virtual std::exception_ptr error() const = 0;
    // "all_gather #3 on group 'tp' (world ranks [0, 1])".
    virtual std::string what() const = 0;
  };

  Work() = default;
  explicit Work(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

  // Whether the operation finished (successfully or with an error).
  bool is_completed() const;
  // Waits until the operation finishes and rethrows its error. Bounded by the
  // group's timeout, counted from when the operation started on this rank.
  void wait() const;
  // Waits at most `timeout`; throws weft::Error if the operation is still running.
  void wait(std::chrono::milliseconds timeout) const;
  // Orders `context` after the operation: what is queued on the context
  // afterwards sees the operation's results. On the CPU this is a host wait,
  // wait() (kernels run on the calling thread's team); on a CUDA context it
  // will make the context's stream wait on the operation's event and return
  // without blocking the host. Rethrows the operation's error where it knows it.
  void wait(const ExecContext& context) const;
  // The operation's error once it finished with one; null otherwise.
  std::exception_ptr error() const;
  // "all_gather #3 on group 'tp'" (empty for a default-constructed Work).
  std::string what() const;

 private:
  std::shared_ptr<const Impl> impl_;
};

// Waits for every Work in order; the first error is rethrown after all of them finished.
void wait_all(const std::vector<Work>& works);

}  // namespace weft::comm
