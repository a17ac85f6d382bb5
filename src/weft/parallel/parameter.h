// Parameter: a named trainable tensor, its gradient, and the ShardSpec that
// says how the local tensor relates to the global one.
//
// The spec drives checkpoint resharding, gradient synchronization groups and
// grad-norm de-duplication: no other code guesses how a parameter is laid out.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "weft/comm/process_group.h"
#include "weft/core/tensor.h"

namespace weft::parallel {

struct ShardSpec {
  // The full, unsharded shape (after vocabulary padding, if any).
  Shape global_shape;
  // The dimension split over `split_group` (-1: not split) and where this
  // rank's slice starts along it.
  int split_dim = -1;
  std::string split_group;  // "tp", "gtp"
  // The split dimension is `blocks` equal blocks (fused QKV: 3), each split
  // over the group; this rank holds [offset, offset + length) of every block.
  int64_t blocks = 1;
  int64_t offset = 0;
  int64_t length = 0;
  // Rows of the global dimension that hold real data (vocabulary padding:
  // rows >= valid_rows are padding and never contribute). -1: all.
  int64_t valid_rows = -1;
  // Groups over which this parameter is replicated: its gradient is the same
  // (or must be made the same) on every rank of each, and a global norm
  // counts it once per group. "tp" for replicated layers; the data groups
  // ("gtp", "ep", "dp") unless the parameter is sharded over one
  // (replicated_groups); an expert's weight under expert parallelism lives on
  // one rank of the "ep" group (its owner) and is not replicated over it.
  std::vector<std::string> replicated_over;
  // A second split, by rows (generalized tensor parallelism): the slice
  // above, this rank's part at the TP level (tp_rows() rows along dimension
  // 0), is split again over `row_group` ("gtp"). This rank holds its rows
  // [row_offset, row_offset + row_length) followed by `row_padding` rows of
  // zeros, so that every rank of the group holds the same number of rows.
  // The padding never reaches a GEMM, a gradient norm or a checkpoint.
  std::string row_group{};  // empty: no row split
  int64_t row_offset = 0;
  int64_t row_length = 0;
  int64_t row_padding = 0;

  bool is_split() const { return split_dim >= 0; }
  bool rows_split() const { return !row_group.empty(); }
  // Rows (dimension 0) of this rank's slice at the TP level.
  int64_t tp_rows() const;
  // The same spec without the row split: the TP-level slice.
  ShardSpec tp_level() const;
};

// What ShardSpec::replicated_over holds for a parameter that nothing but
// tensor parallelism splits: the data groups, whose ranks all hold it whole
// and see different data ("gtp", "ep", "dp"), and "tp" too when every rank of the
// TP group holds it whole (`over_tp`).
std::vector<std::string> replicated_groups(bool over_tp);

struct Parameter {
  std::string name;  // "h.3.attn.qkv.weight"
  Tensor value;      // f32 master weight (local slice)
  Tensor grad;       // f32, same shape, accumulated by backward
  ShardSpec spec;
  // AdamW applies weight decay to 2-D weights only.
  bool decay = false;
  // Under sequence parallelism a replicated parameter's gradient holds only
  // this rank's tokens' share: it must be summed over this group before use.
  std::shared_ptr<comm::ProcessGroup> grad_sum_group;
  // Incremented by whatever writes `value` in place during training (the
  // optimizer step, checkpoint loading): a weight source reuses a cast of the
  // value only while the version is unchanged.
  uint64_t version = 0;
};

// This rank's part of `full` (a tensor of spec.global_shape) as the spec
// describes it, row padding included; `full` itself when the spec is not split.
Tensor shard_of(const ShardSpec& spec, const Tensor& full);
// This rank's rows of `tp_slice` (its slice at the TP level), padded as the
// spec's row split says; `tp_slice` itself without a row split.
Tensor row_shard_of(const ShardSpec& spec, const Tensor& tp_slice);
// The rows of `local` (a tensor of this rank's shape under `spec`) that hold
// data: `local` without its row padding (a view).
Tensor unpadded(const ShardSpec& spec, const Tensor& local);

// `tp_spec` (a TP-level spec) with its rows split over the `group_size` ranks
// of `group_name`, this rank at `rank`: the rows are padded at the tail to a
// multiple of alignment · group_size, so each rank holds the same number of
// rows, a multiple of `alignment`. The group leaves replicated_over.
ShardSpec row_split_spec(ShardSpec tp_spec, const std::string& group_name, int rank, int group_size,
                         int64_t alignment);

// The spec of a tensor of `global` split along `dim` over the `group_size`
// ranks of group `group_name`, this rank at `rank`, in `blocks` equal blocks.
ShardSpec split_spec(const Shape& global, int dim, const std::string& group_name, int rank,
                     int group_size, int64_t blocks = 1);

// A new parameter with a zeroed gradient, tagged for memory accounting: a
// copy of `value` on `device` (the model's, its context's device), or on
// value's own device.
Parameter make_parameter(std::string name, const Tensor& value, ShardSpec spec, bool decay,
                         Device device);
inline Parameter make_parameter(std::string name, const Tensor& value, ShardSpec spec, bool decay) {
  return make_parameter(std::move(name), value, std::move(spec), decay, value.device());
}

// A parameter holding this rank's slice of `full` (drawn identically on every
// rank, on the host), split along `dim` over the "tp" group of `size` ranks in
// `blocks` equal blocks; the whole tensor when size is 1. The slice is kept on
// `device`.
Parameter sharded_parameter(const std::string& name, const Tensor& full, int dim, int rank,
                            int size, int64_t blocks, bool decay, Device device);

}  // namespace weft::parallel
