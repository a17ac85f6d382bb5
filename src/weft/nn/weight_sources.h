// Which weight source a module's weight gets (and which batch a
// GroupedLinear's experts get): the one place in nn/ that knows generalized
// tensor parallelism (GTP) exists, and the call that puts a model's weights
// under it.
//
// GTP shards every selected weight 1/N over the context's gtp group, on top
// of tensor parallelism: the GEMMs still read the whole TP-level weight,
// gathered just in time along a prefetch chain, and the weight gradient is
// reduce-scattered back into the shard (parallel/gtp/). The ranks of a gtp
// group see different data, as data-parallel ranks do: every parameter that
// is not sharded over the group is replicated over it (ShardSpec).
#pragma once

#include <memory>
#include <vector>

#include "weft/nn/module.h"
#include "weft/nn/partition.h"
#include "weft/parallel/context.h"
#include "weft/parallel/weight_source.h"

namespace weft::nn {

// The source of `weight` (this rank's TP-level weight, built and described
// by its spec): the local shard over `weight` itself; under GTP (a context
// with a gtp runtime, whose options select the weight by its name without
// ".weight") a sharded source that takes the weight over, keeping this
// rank's rows, and leaves `weight` empty.
std::shared_ptr<parallel::WeightSource> make_weight_source(const parallel::ContextPtr& context,
                                                           Parameter& weight);

// The batch that fetches `sources`' weights together (a GroupedLinear's
// local experts), or null where each source fetches its own: under GTP with
// Options::batch_experts, when every one of them is sharded, a
// gtp::SourceBatch (one all-gather and one reduce-scatter for all of them).
// The sources must outlive the batch.
std::unique_ptr<parallel::WeightBatch> make_weight_batch(
    const parallel::ContextPtr& context,
    const std::vector<std::shared_ptr<parallel::WeightSource>>& sources);

// Replaces `module` (built without GTP, at the TP size of `context` or
// without TP) by the same module built on `context`, which has GTP on
// (parallel::gtp::enable), holding this rank's shards of its current
// parameters: one call puts every selected weight of a model under GTP, as
// set_tensor_parallel_group does for TP. Call it before training starts
// (gradients start at zero).
template <typename M>
void set_generalized_tensor_parallel_group(std::unique_ptr<M>& module,
                                           parallel::ContextPtr context) {
  WEFT_CHECK(context && context->gtp_runtime,
             "set_generalized_tensor_parallel_group needs a context with GTP on: a gtp group of "
             "several ranks (parallel::gtp::enable)");
  set_tensor_parallel_group(module, std::move(context));
}

}  // namespace weft::nn
