// ShardedParameter: a weight held as this rank's 1/N of its rows over the
// gtp group (generalized tensor parallelism), on top of tensor parallelism.
//
// The weight here is this rank's slice at the TP level, (rows, cols): the
// whole weight without TP, out/T rows (column-parallel) or in/T columns
// (row-parallel) with it. Its rows (output features, so perpendicular to TP
// for row-parallel weights) are padded at the tail to a multiple of
// alignment · N and cut into N equal shards: rank g holds rows
// [g·S, (g+1)·S) of the padded weight, S = padded / N, a multiple of the
// alignment. An all-gather of the shards is the padded weight with the
// padding contiguous at its tail, and its first `rows` rows are the weight
// the GEMMs read (a view). Padding rows are zero and stay zero: they never
// reach a GEMM, their gradient is zero, checkpoints strip them
// (ShardSpec::row_padding) and gradient norms skip them.
//
// The parameter (value, f32 gradient, optimizer state through it) exists for
// the shard only.
#pragma once

#include <string>

#include "weft/comm/process_group.h"
#include "weft/parallel/parameter.h"

namespace weft::parallel::gtp {

class ShardedParameter {
 public:
  // Keeps this rank's shard of `local` (the TP-level weight: its value, spec,
  // name, decay and grad_sum_group) over `group`.
  ShardedParameter(const Parameter& local, const comm::ProcessGroup& group, int64_t alignment);

  Parameter& parameter() { return param_; }
  const Parameter& parameter() const { return param_; }
  // Rows of the TP-level weight (what the GEMMs read).
  int64_t rows() const { return param_.spec.tp_rows(); }
  // Rows every rank holds, padding included.
  int64_t shard_rows() const { return param_.value.size(0); }
  // The shape of the gathered, padded weight: (shard_rows · N, cols...).
  Shape gathered_shape() const { return gathered_shape_; }
  // The shape the GEMMs read: (rows, cols...).
  Shape shape() const;

 private:
  Parameter param_;
  Shape gathered_shape_;
};

}  // namespace weft::parallel::gtp
