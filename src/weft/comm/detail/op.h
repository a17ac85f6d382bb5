// What the backends share and the public headers do not show: one queued
// operation as a group's worker sees it, and how errors name ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/comm/process_group.h"
#include "weft/core/tensor.h"

namespace weft::comm::detail {

// Ranks of a group as errors name them: "[3]", or "[3] (world ranks [7])"
// when the group's numbering differs from the world's.
std::string ranks_str(const std::vector<int>& ranks, const std::vector<int>& world_ranks);

// One queued operation, as the worker sees it.
struct Op {
  OpKind kind = OpKind::barrier;
  ReduceOp reduce = ReduceOp::sum;
  Tensor in{}, out{};  // send: in; recv: out; send_recv: both
  int peer = -1;       // broadcast root, send/send_recv destination
  int src = -1;        // recv/send_recv source
  bool in_place = false;
  int64_t index = 0;   // position among all operations issued on this group
  int64_t seq = -1;    // position among the collectives issued on this group
  std::string what{};  // "all_gather #3 on group 'tp'"
  // all_to_all with variable chunks: the bytes this rank sends to and
  // receives from each rank, in rank order (chunks packed in that order);
  // empty for equal chunks.
  std::vector<int64_t> send_bytes{}, recv_bytes{};
  // A coalesced operation: the caller's tensors (one dtype). The worker packs
  // them into one buffer (`in`/`out`, in place) before the operation runs and
  // unpacks the result after it (pack_coalesced / unpack_coalesced), so the
  // backends see one ordinary collective.
  std::vector<Tensor> parts_in{}, parts_out{};
};

// For a coalesced `op` of a group of `size` ranks where this one is `rank`:
// allocates the flat buffer, copies the inputs into it and points op.in and
// op.out at it.
//   all_reduce       flat = concat(parts_in); in = out = flat
//   all_gather       flat[rank] = concat(parts_in); out = flat, in = flat[rank]
//   reduce_scatter   flat[p] = concat(parts_in[i].chunk(size)[p]); in = flat,
//                    out = flat[rank]
// where flat[p] is the p-th of `size` equal chunks.
void pack_coalesced(Op& op, int rank, int size);
// Copies the result from the flat buffer into parts_out.
void unpack_coalesced(Op& op, int size);

}  // namespace weft::comm::detail
