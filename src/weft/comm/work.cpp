#include "weft/comm/work.h"

#include "weft/core/exec_context.h"

namespace weft::comm {

void Work::Impl::wait_on(const ExecContext&) const { wait(); }

bool Work::is_completed() const { return !impl_ || impl_->completed(); }

void Work::wait() const {
  if (impl_) impl_->wait();
}

void Work::wait(std::chrono::milliseconds timeout) const {
  if (impl_) impl_->wait_for(timeout);
}

void Work::wait(const ExecContext& context) const {
  if (impl_) impl_->wait_on(context);
}

std::exception_ptr Work::error() const { return impl_ ? impl_->error() : nullptr; }

std::string Work::what() const { return impl_ ? impl_->what() : std::string(); }

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
