#include "weft/core/phase_clock.h"

#include "weft/core/cuda.h"
#include "weft/core/error.h"

namespace weft {

PhaseClock::PhaseClock(const ExecContext& ec) : ec_(ec) {}

PhaseClock::~PhaseClock() {
  for (void* e : events_) cuda::destroy_timing_event(e);
}

int PhaseClock::mark() {
  if (ec_.device().is_cuda()) {
    events_.push_back(cuda::record_timing_event(ec_.stream(), ec_.device().index));
    return static_cast<int>(events_.size()) - 1;
  }
  host_.push_back(std::chrono::steady_clock::now());
  return static_cast<int>(host_.size()) - 1;
}

double PhaseClock::seconds(int a, int b) const {
  const size_t n = ec_.device().is_cuda() ? events_.size() : host_.size();
  WEFT_CHECK(a >= 0 && b >= a && static_cast<size_t>(b) < n,
             "PhaseClock::seconds({}, {}): points 0..{} were marked, and a must come first", a, b,
             static_cast<int64_t>(n) - 1);
  if (ec_.device().is_cuda()) {
    return cuda::elapsed_seconds(events_[static_cast<size_t>(a)], events_[static_cast<size_t>(b)]);
  }
  return std::chrono::duration<double>(host_[static_cast<size_t>(b)] -
                                       host_[static_cast<size_t>(a)])
      .count();
}

}  // namespace weft
