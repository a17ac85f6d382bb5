// The layout search: every layout a world and a model allow (over the
// dimensions kPlannableDimensions enables), each priced by the memory and
// cost models, those over a memory limit dropped, the rest best first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/plan/cost_model.h"
#include "weft/plan/layout.h"
#include "weft/plan/memory_model.h"

namespace weft::plan {

struct PlanRequest {
  Workload workload{};
  int world = 1;
  int64_t global_batch = 1;  // sequences per optimizer step
  int64_t memory_limit = 0;  // bytes per rank (0: none)
};

struct PlannedLayout {
  Layout layout{};
  MemoryBreakdown memory{};  // the largest rank's
  StepCost cost{};
};

// Why `layout` cannot train `workload` on `world` ranks at `global_batch`
// sequences per step (the option to change, as weft train would say it);
// empty when it can. The rules are weft's: sizes multiply to the world,
// heads and KV heads split over tp (nn::validate), experts over ep, the
// sequence over 2·cp and (--sp seq) tp, the micro-batch over tp (--sp
// batch), the layers over pp·vpp, the micro-batches over pp (interleaved),
// GTP neither on a GPU nor with replicated KV heads, the distributed
// optimizer only with dp > 1.
std::string layout_problem(const Workload& workload, const Layout& layout, int world,
                           int64_t global_batch);

// Every valid layout whose varied dimensions are plannable, unpriced.
std::vector<Layout> enumerate_layouts(const Workload& workload, int world, int64_t global_batch);
// The same over the dimensions `varied` (the others at their defaults).
std::vector<Layout> enumerate_layouts(const Workload& workload, int world, int64_t global_batch,
                                      const std::vector<Dimension>& varied);

struct PlanResult {
  // Within the limit, fastest first; predictions in the same 0.25% step (within
  // the model's error) smallest memory first.
  std::vector<PlannedLayout> fits;
  // The layout that needs the least memory, of all (when none fits: what to say).
  PlannedLayout smallest{};
  size_t considered = 0;
};

// The search. A world or batch that no layout fits is a weft::Error saying why.
PlanResult plan_layouts(const PlanRequest& request, const Machine& machine);

}  // namespace weft::plan
