// The quantized gather of generalized tensor parallelism: under an FP8,
// MXFP8 or NVFP4 recipe a GTP weight travels in its quantized form (data and
// block scales packed into one byte buffer, one all-gather) instead of in
// high precision.
//
// Each rank quantizes its shard (rows [g·S, (g+1)·S) of the padded weight)
// with the Linear's GemmQuantizer, the amaxes that set current per-tensor
// scales reduced over the gtp group as well as the TP group (delayed
// scaling's through the registry's end_step over a group spanning both), so
// that every rank uses the scale the whole weight would get. The shards hold
// a multiple of the block rows (16 for NVFP4's 16x16 tiles, 32 for MXFP8's
// column-wise 32x1 blocks, 128 for fp8-block's 128x128 tiles:
// ShardedWeightSource raises the alignment to that)
// and the padding rows are zero, which changes no block's amax: the gathered
// data and scales, cut to the weight's rows, are bit for bit the whole weight
// quantized after a high-precision gather.
//
// Column-wise copies (the dgrad GEMM's weight): per-tensor scaling and
// NVFP4's 16x16 tiles give both directions the same values, so the row-wise
// shard serves the backward too. MXFP8's column-wise copy has 32x1 blocks
// running down the rows, across the row-wise 1x32 blocks: it cannot be
// derived from the row-wise data without quantizing twice (not what the
// unsharded run computes), so the backward gathers the column-wise quantized
// shards ((cols, S) each, 32x1 blocks within the shard's rows).
//
// The gathered buffer holds the N packed shards one after another; the GEMM
// operand (on the CPU, the weight dequantized to f32) is decoded shard by
// shard from it, each shard's rows from its own data and scales — no unpacking
// copy, and a block never spans two shards.
#pragma once

#include <cstdint>

#include "weft/comm/process_group.h"
#include "weft/core/quantized.h"
#include "weft/parallel/gemm_quantizer.h"

namespace weft::parallel::gtp {

// One direction of a shard quantized for its gather, cached: quantized again
// only when the weight's values, the quantizer's weight key (delayed
// scaling's scale) or the pass rule below change.
class QuantizedShard {
 public:
  // Quantizes `shard` (S rows of a weight, this rank's, `version` its
  // Parameter::version) unless the packed copy is current: made for the
  // same version and weight key in this pass, or in an earlier pass that
  // allows reuse (PassContext::reuse_weight_casts). A training pass that
  // reuses it records its amax again. True when it quantized.
  bool update(GemmQuantizer& quantizer, comm::ProcessGroup& group, const Tensor& shard,
              uint64_t version, bool columnwise, const PassContext& pass);

  bool defined() const { return packed_.defined(); }
  // Data, then block scales (none under per-tensor scaling): what this rank
  // sends; every rank's is the same size.
  const Tensor& packed() const { return packed_; }
  // Bytes moved per gather by this rank: the packed bytes and, under
  // per-tensor and NVFP4 scaling, the f32 tensor scale (the same on every
  // rank, so not sent here, but a GPU sends it with the data).
  int64_t bytes_moved() const;
  // Elements of the shard (padding rows included).
  int64_t elements() const { return meta_.rows * meta_.cols; }
  // Times update() quantized (tests check once per step).
  int64_t quantizations() const { return quantizations_; }

  // `gathered` (the N packed shards, rank order) decoded into `out`, f32
  // (N·S, cols): rows [r·S, (r+1)·S) from rank r's shard. Shards wholly in
  // the padding (start ≥ `rows`) are skipped.
  void dequantize(const ExecContext& ec, const Tensor& gathered, int64_t rows, Tensor& out) const;
  // Rank r's shard in `gathered`, as a quantized (S, cols) tensor viewing
  // its bytes (the row-wise or the column-wise copy, as this rank's).
  QuantizedTensor part(const Tensor& gathered, int64_t r) const;

 private:
  QuantizedTensor meta_;  // mode, dtype, shape, tensor scale, amax; no tensors
  bool columnwise_ = false;
  Shape data_shape_, scale_shape_;
  DType scale_dtype_ = DType::u8;
  int64_t data_bytes_ = 0;
  Tensor packed_;
  Tensor tensor_scale_;  // per-tensor scaling's f32 decode scale
  uint64_t version_ = 0, serial_ = 0;
  float key_ = 0.0f;
  int64_t quantizations_ = 0;
};

// The rows every shard must be a multiple of for the recipe's blocks.
int64_t quantized_row_alignment(Recipe recipe);

}  // namespace weft::parallel::gtp
