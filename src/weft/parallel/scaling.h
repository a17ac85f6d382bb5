// ScalingRegistry: the scaling state of one model's quantized tensors on one
// rank — delayed scaling's amax histories and scales, and the step counter
// the random parts of the recipes (stochastic rounding, the Hadamard signs)
// derive their streams from. A ParallelContext holds one (mutable state hung
// off the const context, like its Workspace); each Linear's GemmQuantizer
// registers its tensors at construction, in module order, so every rank of a
// group holds the same tensors in the same order.
//
// Delayed scaling, step by step (Transformer Engine's DelayedScaling):
//   each quantization records its amax: history[0] = fmax(history[0], amax)
//   (NaN amaxes are dropped, as fmax drops them; Inf stays);
//   end_step(): the history[0] of every tensor reduced (max) over the amax
//   group in one coalesced all-reduce; then for each tensor
//     amax  = max(history) (algo max) or history[0] (most_recent)
//     scale = fp8_max / amax / 2^margin when amax is finite and > 0, else the
//             previous scale; an overflowing scale becomes FLT_MAX
//     roll:   history[i] = history[i+1] for 0 < i < len-1,
//             history[len-1] = history[0], history[0] = 0
//   so the scale of step s+1 comes from the amaxes of steps s-len+1 .. s.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/comm/process_group.h"
#include "weft/parallel/precision.h"

namespace weft::parallel {

struct DelayedScalingState {
  std::vector<float> amax_history;
  float fp8_max = 448.0f;
  float scale = 1.0f;
  float scale_inv() const { return 1.0f / scale; }
};

// fp8_max / amax / 2^margin with TE's rules (previous scale for a zero or
// non-finite amax, FLT_MAX for an overflow).
float scale_from_amax(float amax, float fp8_max, int margin, float previous);

class ScalingRegistry {
 public:
  // A tensor scaled with delayed scaling: its id.
  int add(const std::string& name, float fp8_max, int history);
  int size() const { return static_cast<int>(states_.size()); }
  const std::string& name(int id) const { return names_[static_cast<size_t>(id)]; }
  const DelayedScalingState& state(int id) const { return states_[static_cast<size_t>(id)]; }
  // This step's amax of tensor `id` (fmax into history[0]).
  void record(int id, float amax);
  // Records without a host read (kernels::QuantizeConfig::amax_accumulator):
  // one i32 element per tensor, on `device`, where quantizations fold their
  // amaxes on their stream. end_step folds it into history[0] first (one copy
  // to the host per step). Reallocated (after folding) when tensors were
  // added or the device changed. snapshot() sees it only after end_step.
  const Tensor& amax_accumulator(Device device);
  // The end of an optimizer step (collective over `group` when it is not
  // null and has more than one rank): the reduction, scale update and roll
  // above under `precision`'s algo and margin; then the step counter moves on.
  // Under generalized tensor parallelism `group` must span the gtp group as
  // well as TP: a GTP weight's shard records the amax of its rows only.
  void end_step(const Precision& precision, comm::ProcessGroup* group);

  // Optimizer steps ended so far, and a number unique within the step for
  // each caller that needs its own random stream (reset at end_step).
  uint64_t steps() const { return steps_; }
  uint64_t next_stream() { return streams_++; }

  // What checkpoints hold: the step counter and, per tensor, its scale and history.
  struct Snapshot {
    uint64_t steps = 0;
    std::vector<std::string> names;
    std::vector<float> scales;
    std::vector<std::vector<float>> histories;
  };
  Snapshot snapshot() const;
  // Throws weft::Error when the snapshot's tensors are not this registry's.
  void restore(const Snapshot& s);

 private:
  std::vector<std::string> names_;
  std::vector<DelayedScalingState> states_;
  uint64_t steps_ = 0;
  uint64_t streams_ = 0;
  Tensor accumulator_;
  void fold_accumulator();
};

}  // namespace weft::parallel
