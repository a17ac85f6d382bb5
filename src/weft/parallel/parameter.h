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
  // ("cp", "gtp", "ep", "dp") unless the parameter is sharded over one
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
  // A shared slice (grouped-query attention with more TP ranks than key/value
  // heads, nn/attention.h): the split above has fewer positions than its
  // group has ranks, and `shared` ranks hold the slice at one position
  // together (this rank is `shared_rank` of them). Of the slice's blocks, the
  // first `dealt_blocks` are dealt round-robin among those ranks (block b to
  // shared rank b mod shared); the remaining, common blocks are held by all
  // of them. This rank holds its dealt blocks, then the common ones, in block
  // order. The common blocks' gradients are partial sums over the sharing
  // ranks (Parameter::share_group); checkpoints save the slice once, whole,
  // and norms count the common blocks once (shared rank 0's). Dimension 0
  // only, without a row split. 1: not shared.
  int shared = 1;
  int shared_rank = 0;
  int64_t dealt_blocks = 0;

  bool is_split() const { return split_dim >= 0; }
  bool rows_split() const { return !row_group.empty(); }
  bool is_shared() const { return shared > 1; }
  // Rows (dimension 0) of this rank's slice at the TP level.
  int64_t tp_rows() const;
  // The same spec without the row split: the TP-level slice.
  ShardSpec tp_level() const;
  // The blocks of the split dimension this rank holds, in its local order:
  // every block, or a shared slice's dealt and common blocks.
  std::vector<int64_t> held_blocks() const;
  // The slice the sharing ranks hold together: this spec without sharing.
  ShardSpec shared_slice() const;
};

// What ShardSpec::replicated_over holds for a parameter that nothing but
// tensor parallelism splits: the data groups, whose ranks all hold it whole
// and see different data ("cp", "gtp", "ep", "dp"), and "tp" too when every rank of the
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
  // A shared slice's sharing ranks (ShardSpec::shared), by shared rank: the
  // gradient of its common rows (common_rows) must be summed over this group
  // before use, and a checkpoint gathers the slice over it.
  std::shared_ptr<comm::ProcessGroup> share_group;
  // Incremented by whatever writes `value` in place during training (the
  // optimizer step, checkpoint loading): a weight source reuses a cast of the
  // value only while the version is unchanged.
  uint64_t version = 0;
  // The first micro-batch's wgrad GEMM writes `grad` instead of adding to it
  // (PassContext::first_microbatch; set by the Linear that does so): a
  // trainer need not zero it between steps.
  bool grad_overwritten = false;
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

// Shared slices (ShardSpec::shared), dimension 0:
// This rank's blocks of `slice` (a tensor of spec.shared_slice()'s shape).
Tensor held_part(const ShardSpec& spec, const Tensor& slice);
// The whole shared slice from `gathered`: every sharing rank's local tensor,
// concatenated along dimension 0 by shared rank (an all-gather over the
// share group).
Tensor joined_slice(const ShardSpec& spec, const Tensor& gathered);
// The rows of `local` (this rank's tensor under `spec`) in common blocks: a
// view, undefined when the spec has none (or is not shared).
Tensor common_rows(const ShardSpec& spec, const Tensor& local);
// The part of `local` a global norm counts on this rank: without row padding,
// and without the common rows on any sharing rank but shared rank 0 (a view).
Tensor counted_part(const ShardSpec& spec, const Tensor& local);

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

// The spec of `global` split along dimension 0 over the `group_size` ranks
// of `group_name` at only `positions` positions (dividing group_size), in
// `blocks` equal blocks: rank r holds the slice at position r mod positions,
// which group_size / positions ranks share (rank r is shared rank
// r / positions); the first `dealt_blocks` blocks are dealt among them
// (ShardSpec::shared). positions == group_size is split_spec's split.
ShardSpec shared_split_spec(const Shape& global, const std::string& group_name, int rank,
                            int group_size, int positions, int64_t blocks, int64_t dealt_blocks);

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
