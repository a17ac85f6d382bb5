// Times between points in a context's work, taken without waiting for it.
//
// On the CPU a point is a host clock reading (its kernels finish before they
// return). On a GPU it is a CUDA event recorded on the context's stream: the
// durations are read once the stream has passed the later point (a training
// step reads them after its one host read), so timing the phases of a step
// adds no synchronization and measures the GPU's work, not its queueing.
#pragma once

#include <chrono>
#include <vector>

#include "weft/core/exec_context.h"

namespace weft {

class PhaseClock {
 public:
  explicit PhaseClock(const ExecContext& ec);
  ~PhaseClock();
  PhaseClock(const PhaseClock&) = delete;
  PhaseClock& operator=(const PhaseClock&) = delete;

  // Records the current point of the context's work; returns its index.
  int mark();
  // Seconds from point a to point b (a before b). On a GPU, when b has not
  // passed yet, waits for it (a host synchronization).
  double seconds(int a, int b) const;

 private:
  ExecContext ec_;
  std::vector<std::chrono::steady_clock::time_point> host_;
  std::vector<void*> events_;  // cudaEvent_t on a GPU context
};

}  // namespace weft
