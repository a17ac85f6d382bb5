// The grouped row of `weft bench gemm`: a Mixture-of-Experts fc1 as
// nn::GroupedLinear (E experts, tokens/E rows each, forward + backward)
// against one dense GEMM of the same total size (tokens x C -> 4C, forward,
// dgrad and wgrad), timed alternately in the same run on the host. The
// GroupedLinear passes reuse the experts' weight casts as the trainer's
// passes do (PassContext::reuse_weight_casts): the cast of the f32 master
// weights to bf16 happens once per optimizer step, not per pass, and is timed
// on its own.
#pragma once

#include <cstdint>

#include "weft/core/dtype.h"

namespace weft::bench {

struct GroupedTiming {
  double grouped = 0, dense = 0;  // seconds per forward + backward (best round)
  double cast = 0;                // seconds of the experts' weight casts, once a step (bf16)
  double flops = 0;               // of either: 3 GEMMs of 2·tokens·C·4C
};

GroupedTiming time_grouped_fc1(DType dtype, int64_t tokens, int64_t width, int64_t experts,
                               int rounds, double min_time);

}  // namespace weft::bench
