// The quantized gather of generalized tensor parallelism: under an FP8,
// MXFP8 or NVFP4 recipe a GTP weight travels in its quantized form (data and
// scales in one coalesced all-gather) instead of in high precision.
//
// Each rank quantizes its shard (rows [g·S, (g+1)·S) of the padded weight)
// with the Linear's GemmQuantizer, the amaxes that set per-tensor scales
// reduced over the gtp group as well as the TP group, so that every rank
// uses the scale the whole weight would get. The shards hold a multiple of
// the block rows (16 for NVFP4's 16x16 tiles, 32 for MXFP8's column-wise
// 32x1 blocks: ShardedWeightSource raises the alignment to that) and the
// padding rows are zero, which changes no block's amax: the gathered data
// and scales, cut to the weight's rows, are bit for bit the whole weight
// quantized after a high-precision gather.
//
// Column-wise copies (the dgrad GEMM's weight): per-tensor scaling and
// NVFP4's 16x16 tiles give both directions the same values, so the row-wise
// data serves the backward too. MXFP8's column-wise copy has 32x1 blocks
// running down the rows, across the row-wise 1x32 blocks: it cannot be
// derived from the row-wise data without quantizing twice (not what the
// unsharded run computes), so the backward gathers the column-wise quantized
// shards ((cols, S) each) and interleaves them into the (cols, rows) copy.
#pragma once

#include <cstdint>

#include "weft/comm/process_group.h"
#include "weft/core/quantized.h"
#include "weft/parallel/gemm_quantizer.h"

namespace weft::parallel::gtp {

struct QuantizedGather {
  QuantizedTensor weight;  // the whole weight: (rows, cols), the copy asked for
  int64_t bytes_sent = 0;  // what this rank contributed (data and scales)
  int64_t elements = 0;    // elements of this rank's shard
  // Bytes moved per weight element (bf16: 2; MXFP8 ≈ 1.03; NVFP4 ≈ 0.56).
  double bytes_per_element() const {
    return elements > 0 ? static_cast<double>(bytes_sent) / static_cast<double>(elements) : 0.0;
  }
};

// Quantizes `shard` (this rank's rows of a weight whose first `rows` rows of
// the gathered, padded weight are real) with `quantizer` and all-gathers it
// over `group` in one coalesced collective.
QuantizedGather gather_quantized(GemmQuantizer& quantizer, comm::ProcessGroup& group,
                                 const Tensor& shard, int64_t rows, bool columnwise,
                                 PassContext& pass);

// The rows every shard must be a multiple of for the recipe's blocks.
int64_t quantized_row_alignment(Recipe recipe);

}  // namespace weft::parallel::gtp
