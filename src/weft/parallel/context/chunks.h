// Context parallelism's load-balanced sequence layout.
//
// A sequence of S positions is cut into 2N chunks of c = S/(2N) positions;
// rank r of the context-parallel group (size N) holds chunks r and 2N-1-r,
// in that order, as one local sequence of 2c rows. Under the causal mask a
// chunk late in the sequence attends to more keys than an early one, and the
// pair (r, 2N-1-r) makes every rank's attention work the same (2N+1 chunk
// blocks), as Megatron-LM and Transformer Engine do.
//
//   local row t < c      is position r·c + t
//   local row c <= t     is position (2N-1-r)·c + t - c
//
// Every position-dependent quantity (learned position rows, rotary angles,
// the targets and the loss, dropout) is taken at the true position, so N
// ranks compute what one rank computes over the whole sequence.
#pragma once

#include <cstdint>

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::parallel::context {

struct SequenceChunks {
  int64_t sequence = 0;  // S, divisible by 2N
  int size = 1;          // N, the context-parallel group's size
  int rank = 0;          // r

  // c = S/(2N).
  int64_t chunk() const { return sequence / (2 * size); }
  // 2c: the rows this rank holds.
  int64_t local() const { return 2 * chunk(); }
  // The chunk number (0 .. 2N-1) of rank `owner`'s local chunk `i` (0 or 1).
  int64_t chunk_index(int owner, int i) const { return i == 0 ? owner : 2 * size - 1 - owner; }
  // The rank holding chunk k, and which of its two local chunks k is.
  int owner(int64_t k) const { return static_cast<int>(k < size ? k : 2 * size - 1 - k); }
  int local_index(int64_t k) const { return k < size ? 0 : 1; }
  // The true position of this rank's local row t.
  int64_t position(int64_t t) const {
    return t < chunk() ? rank * chunk() + t : (2 * size - 1 - rank) * chunk() + t - chunk();
  }
};

// Throws weft::Error unless `sequence` divides into 2·`size` chunks; the
// message names --seq and --cp as a user types them.
void check_sequence(int64_t sequence, int size);

// tokens (B, S) (any dtype, any device) -> this rank's (B, 2c) columns.
Tensor local_columns(const ExecContext& ec, const Tensor& tokens, const SequenceChunks& chunks);
// table (P, ...) with P >= S (a row per position) -> (2c, ...): the rows of
// this rank's positions (a copy).
Tensor local_rows(const Tensor& table, const SequenceChunks& chunks);
// The gradient of local_rows: table_grad rows of this rank's positions += d (2c, ...), f32.
void add_local_rows(const Tensor& d, Tensor& table_grad, const SequenceChunks& chunks);

}  // namespace weft::parallel::context
