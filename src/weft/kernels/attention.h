// Multi-head self-attention as in GPT-2: per batch entry b and head h,
//
//   P = softmax(Q Kᵀ / √D + causal mask),  out = dropout(P) · V
//
// with Q, K, V read in place from a packed qkv activation: row (b, t) holds
// [q (C) | k (C) | v (C)], C = H·D, head h at columns h·D .. h·D+D-1 of each
// part. The rows are batch-major, (B, T, ·) with token (b, t) at row b·T + t,
// or sequence-major, (T, B, ·) with it at row t·B + b (the residual stream
// under sequence parallelism); the layout changes only where rows are read
// and written, so both give the same results. qkv, out and their gradients are f32 or bf16 (all the
// same); scores, softmax and every product accumulate in f32.
//
// Masked (future) positions have probability exactly 0. Dropout on P uses
// the counter-based stream (seed, offset + ((b·H + h)·T + t)·T + j) for entry
// (b, h, t, j), so one call consumes B·H·T·T numbers of the stream whatever
// the thread count; advance the offset by that much between calls.
#pragma once

#include <cstdint>

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::kernels {

struct AttentionConfig {
  int64_t heads = 1;
  // Probability of dropping an attention weight, in [0, 1).
  float dropout = 0.0f;
  uint64_t seed = 0;
  uint64_t offset = 0;
  // Each position attends only to itself and earlier positions.
  bool causal = true;
  // qkv, out and their gradients are (T, B, ·) instead of (B, T, ·).
  bool sequence_major = false;
};

// What forward leaves for backward; the caller owns it, one per call in
// flight. Tensors already here with the right shape and dtype are overwritten
// rather than reallocated, so passing the same AttentionSaved every step
// allocates nothing (pass a fresh one to keep an older result).
struct AttentionSaved {
  // (B,H,T,T) in qkv's dtype: softmax probabilities before dropout.
  Tensor probs;
  // (B,H,T,T) u8, 1 where a probability was kept; undefined without dropout.
  Tensor mask;
  // (B,H,T,T) in qkv's dtype: probs·mask/(1-p), the matrix multiplied with V;
  // undefined without dropout (probs is used instead).
  Tensor weights;
};

// Scratch memory of the attention kernels, grown when a call needs more and
// otherwise reused: keep one per calling thread (never share one between
// concurrent calls) so that steady-state calls allocate nothing.
struct AttentionWorkspace {
  Tensor buffer;
};

// qkv (B,T,3C) -> out (B,T,C); saved.probs (B,H,T,T) [, saved.mask, saved.weights]
// (qkv (T,B,3C) -> out (T,B,C) when sequence_major)
void attention_forward(const ExecContext& ec, const Tensor& qkv, const AttentionConfig& config,
                       Tensor& out, AttentionSaved& saved, AttentionWorkspace& workspace);
// dout (B,T,C), qkv (B,T,3C), saved from the forward of the same qkv and config
//   -> dqkv (B,T,3C) (overwritten); (T,B,·) when sequence_major
void attention_backward(const ExecContext& ec, const Tensor& dout, const Tensor& qkv,
                        const AttentionSaved& saved, const AttentionConfig& config, Tensor& dqkv,
                        AttentionWorkspace& workspace);

// Transition: the forms without a context, until nn/ and parallel/ are migrated (issue 11).
inline void attention_forward(const Tensor& qkv, const AttentionConfig& config, Tensor& out,
                              AttentionSaved& saved, AttentionWorkspace& workspace) {
  attention_forward(ExecContext::host(), qkv, config, out, saved, workspace);
}
inline void attention_backward(const Tensor& dout, const Tensor& qkv, const AttentionSaved& saved,
                               const AttentionConfig& config, Tensor& dqkv,
                               AttentionWorkspace& workspace) {
  attention_backward(ExecContext::host(), dout, qkv, saved, config, dqkv, workspace);
}

}  // namespace weft::kernels
