// Runtime: one model's generalized-tensor-parallel state on one rank — its
// options, weight cache and prefetch chain. The model's ParallelContext
// holds it (as it holds the Workspace): every ShardedWeightSource of the
// model shares it. Not thread-safe (one rank's model).
#pragma once

#include <memory>

#include "weft/parallel/context.h"
#include "weft/parallel/gtp/options.h"
#include "weft/parallel/gtp/prefetch_chain.h"
#include "weft/parallel/gtp/weight_cache.h"

namespace weft::parallel::gtp {

struct Runtime {
  Runtime(Options options, const ExecContext& exec);

  Options options;
  WeightCache cache;
  PrefetchChain chain;
};

// Turns generalized tensor parallelism on for the models built on `context`
// afterwards: weights are sharded over `group` (the grid's "gtp" dimension).
// A group of one rank leaves it off.
void enable(ParallelContext& context, std::shared_ptr<comm::ProcessGroup> group,
            Options options = {});

}  // namespace weft::parallel::gtp
