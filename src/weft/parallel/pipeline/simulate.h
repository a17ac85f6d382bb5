// The checker of a pipeline schedule: runs its action lists as the executor
// would — compute takes its cost, a send is posted and never blocks, a
// receive waits for the matching send on its first-in-first-out channel —
// and throws weft::Error naming the first problem:
//   - a deadlock (every unfinished rank waits on a receive that never comes),
//   - a receive that meets another message at its channel's head (the two
//     ends of a channel disagree on the order),
//   - a forward whose input was not received, a backward before its forward
//     on the same stage or before its output gradient was received, a weight
//     gradient before its input gradient, a send of something not computed,
//   - an action on the wrong rank, a pass missing or run twice, a message
//     never received.
// It also measures each rank's busy time, the step's length (the bubble) and
// the activations alive, and prints the timeline.
#pragma once

#include <string>
#include <vector>

#include "weft/parallel/pipeline/schedule.h"

namespace weft::parallel::pipeline {

struct TimedAction {
  Action action;
  double start = 0.0;
  double end = 0.0;
};

struct Simulation {
  double makespan = 0.0;
  std::vector<double> busy;  // per rank: the sum of its compute costs
  // Per rank, the most (micro-batch, stage) pairs alive at once: forward done
  // and backward (backward_input) not yet — the activations a full backward
  // needs.
  std::vector<int> peak_alive;
  // The same counted until backward_weight (equal to peak_alive without a
  // split backward): what a rank holds until its last pass of a micro-batch.
  std::vector<int> peak_pending;
  std::vector<std::vector<TimedAction>> timeline;  // per rank, compute actions only

  // The share of the step the ranks sit idle: 1 - Σ busy / (P · makespan).
  double bubble() const;
};

// Checks and times `schedule` (see above). transfer: the time a message
// takes from its send to its receive.
Simulation simulate(const PipelineSchedule& schedule, const ComputeCosts& costs = {},
                    double transfer = 0.0);

// One row per rank: each compute action drawn over the time steps it takes,
// "F3" (forward of micro-batch 3), "B3", "I3" / "W3" (input / weight
// gradient); with virtual stages the chunk follows ("F3.1"); "." is idle.
// The time step is the smallest compute cost.
std::string format_timeline(const PipelineSchedule& schedule, const Simulation& sim);

}  // namespace weft::parallel::pipeline
