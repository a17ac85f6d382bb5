// A run's configuration as the planner sees it (plan/): its layout and its
// workload, and back (a plan's layout applied to a configuration).
#pragma once

#include "weft/plan/layout.h"
#include "weft/plan/memory_model.h"
#include "weft/train/config.h"

namespace weft::train {

// The layout of `cfg` (dp 0, "auto", counts as 1).
plan::Layout plan_layout(const TrainConfig& cfg);
// The model shape, compute type, device and the options that move memory.
plan::Workload plan_workload(const TrainConfig& cfg);

}  // namespace weft::train
