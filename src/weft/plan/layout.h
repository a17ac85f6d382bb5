// A layout of a training run as the planner sees it: the sizes of every
// parallel dimension, the micro-batching, the memory levers, and the
// `weft train` options that ask for it.
//
// The planner knows dimensions that `weft train` may not accept yet (pp, vpp,
// cp, the distributed optimizer, recomputation): the memory and cost models
// price all of them, and kPlannableDimensions says which ones the layout
// search may vary, so that `weft plan` never prints an option `weft train`
// refuses. Switching a dimension on is one line there.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "weft/parallel/context.h"

namespace weft::plan {

enum class Recompute { none, selective, full };
const char* recompute_name(Recompute r);  // "none", "selective", "full"
// "none" | "selective" | "full"; anything else is a weft::Error naming them.
Recompute parse_recompute(const std::string& s);

enum class PipelineSchedule { gpipe, one_f_one_b, interleaved, zero_bubble };
const char* pipeline_schedule_name(PipelineSchedule s);  // "gpipe", "1f1b", ...
PipelineSchedule parse_pipeline_schedule(const std::string& s);

struct Layout {
  int tp = 1;
  parallel::SequenceParallel sp = parallel::SequenceParallel::off;
  int pp = 1;
  int vpp = 1;  // virtual stages per pipeline rank (interleaved)
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  int cp = 1;
  int ep = 1;
  int gtp = 1;
  int dp = 1;
  int64_t micro_batch = 1;  // sequences per micro-batch per data rank
  int64_t grad_accum = 1;   // micro-batches per optimizer step (under pp: in flight)
  bool distributed_optimizer = false;
  Recompute recompute = Recompute::none;
  int64_t recompute_layers = 0;  // layers per stage recomputed under full (0: all)

  int world() const { return tp * cp * ep * gtp * pp * dp; }
  // The ranks that see different sequences (ep, gtp, dp).
  int data_ranks() const { return ep * gtp * dp; }
  int64_t global_batch() const { return micro_batch * data_ranks() * grad_accum; }
  // The `weft train` options that ask for this layout ("--tp", "2", ...),
  // sizes of 1 and defaults left out.
  std::vector<std::string> args() const;
  // The same as one line.
  std::string text() const;
};

// The dimensions the layout search may vary.
enum class Dimension {
  tp,
  sp,
  pp,
  vpp,
  cp,
  ep,
  gtp,
  dp,
  micro_batch,
  distributed_optimizer,
  recompute
};
const char* dimension_name(Dimension d);

// Which dimensions `weft train` on this branch accepts, and so which the
// search varies (the others stay at their defaults: size 1, off, none).
struct PlannableDimension {
  Dimension dimension;
  bool enabled;
};
inline constexpr std::array<PlannableDimension, 11> kPlannableDimensions{{
    {Dimension::tp, true},
    {Dimension::sp, true},
    {Dimension::dp, true},
    {Dimension::gtp, true},
    {Dimension::ep, true},
    {Dimension::micro_batch, true},
    {Dimension::pp, false},
    {Dimension::vpp, false},
    {Dimension::cp, false},
    {Dimension::distributed_optimizer, false},
    {Dimension::recompute, false},
}};
bool plannable(Dimension d);

// The largest world (and any one size) a layout may have.
inline constexpr int64_t kMaxWorld = int64_t{1} << 24;

// Parses the `weft train` options of a layout ("--tp 8 --pp 16 --cp 2 ..."),
// words or one string split at spaces; options that are not layout options
// are a weft::Error naming them. Every dimension is understood, plannable
// or not (weft plan --evaluate prices layouts this build cannot run).
Layout parse_layout_args(const std::vector<std::string>& args);
Layout parse_layout_args(const std::string& text);

}  // namespace weft::plan
