// Token and position embeddings (GPT-2's wte and wpe).
//
// Tables and their gradients are f32 (the lookup also reads a bf16 table:
// the weight a bf16 recipe's weight source hands out); activations are f32
// or bf16. Under
// vocab parallelism each rank holds the rows [vocab_start, vocab_start + V) of
// wte: tokens held by other ranks look up zeros here, the per-rank outputs are
// summed by an all-reduce, and the position embedding is added once, after it.
//
// The backward kernels accumulate (+=), so gradients of several microbatches
// add up in place. They are deterministic: every gradient element receives its
// contributions in token order whatever the thread count, so results are
// bitwise the same for any number of threads.
#pragma once

#include <cstdint>

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::kernels {

struct EmbeddingOptions {
  // Vocabulary id of wte's first row (the rank's slice under vocab parallelism).
  int64_t vocab_start = 0;
  // Token ids must lie in [0, valid_vocab); rows of wte past it are padding.
  // 0 means vocab_start + V: the vocabulary ends with this table. A
  // vocab-parallel caller must give the global vocabulary size, or tokens held
  // by later ranks are rejected as out of range.
  int64_t valid_vocab = 0;
  // The token ids were checked by the caller (on the host, before they were
  // copied to the device): on a GPU no kernel reads them back, and the
  // backward groups the rows by token on the device. Out-of-range ids are
  // then never read out of bounds, but are not reported either.
  bool ids_checked = false;
};

// tokens (B,T) i32, wte (V,C) f32|bf16 -> out (B,T,C) f32|bf16 = wte[tokens - vocab_start],
// zero rows for tokens outside [vocab_start, vocab_start + V). Token ids
// outside [0, valid_vocab) throw weft::Error naming the position and the id.
void embedding_forward(const ExecContext& ec, const Tensor& tokens, const Tensor& wte, Tensor& out,
                       const EmbeddingOptions& opt = {});
// dout (B,T,C) f32|bf16, tokens (B,T) -> dwte (V,C) f32 += dout rows scattered to their tokens
void embedding_backward(const ExecContext& ec, const Tensor& dout, const Tensor& tokens,
                        Tensor& dwte, const EmbeddingOptions& opt = {});

// wpe (maxT,C) f32 -> out (B,T,C) f32|bf16 += wpe[pos_offset + t]
// pos_offset is the position of the first token (generation continuing a prefix).
// With sequence_major, out is (T,B,C) (the residual stream under sequence
// parallelism): row i holds position i / B + pos_offset.
void position_embedding_forward(const ExecContext& ec, const Tensor& wpe, Tensor& out,
                                int64_t pos_offset = 0, bool sequence_major = false);
// dout (B,T,C) f32|bf16 -> dwpe (maxT,C) f32: dwpe[pos_offset + t] += Σ_b dout[b,t]
// ((T,B,C) with sequence_major; the batch is summed in order b = 0, 1, ... either way)
void position_embedding_backward(const ExecContext& ec, const Tensor& dout, Tensor& dwpe,
                                 int64_t pos_offset = 0, bool sequence_major = false);

}  // namespace weft::kernels
