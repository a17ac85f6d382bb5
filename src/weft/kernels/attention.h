// Multi-head self-attention as in GPT-2, or grouped-query attention as in
// Llama: per batch entry b and query head h,
//
//   P = softmax(Q_h K_gᵀ / √D + causal mask),  out_h = dropout(P) · V_g,  g = h mod Hkv
//
// with Q, K, V read in place from a packed qkv activation: row (b, t) holds
// [q (H·D) | k (Hkv·D) | v (Hkv·D)], head h of a part at columns h·D ..
// h·D+D-1 of it (Hkv = H: multi-head attention, [q (C) | k (C) | v (C)],
// C = H·D). The gradient of a key/value head sums over the query heads that
// read it. The rows are batch-major, (B, T, ·) with token (b, t) at row b·T + t,
// or sequence-major, (T, B, ·) with it at row t·B + b (the residual stream
// under sequence parallelism); the layout changes only where rows are read
// and written, so both give the same results. qkv, out and their gradients are f32 or bf16 (all the
// same); scores, softmax and every product accumulate in f32.
//
// Masked (future) positions have probability exactly 0. Dropout on P uses
// the counter-based stream (seed, offset + ((b·H + h)·T + t)·T + j) for entry
// (b, h, t, j), so one call consumes B·H·T·T numbers of the stream whatever
// the thread count; advance the offset by that much between calls.
//
// The CPU kernels are fused and cache-blocked (FlashAttention-2's algorithm):
// forward runs each block of query rows over the blocks of keys with an
// online softmax, skipping the blocks the causal mask hides entirely, and
// keeps only each row's logsumexp; backward recomputes the probabilities block
// by block from it, and draws the dropout decisions again from the stream.
// Besides the activations they keep O(T) per head, never a (B,H,T,T) tensor
// -- except for short sequences (at most 128 positions), where a head is one
// block: there the forward keeps the probabilities and backward reads them
// (four products per head instead of five, as unfused kernels do).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::kernels {

struct AttentionConfig {
  int64_t heads = 1;
  int64_t kv_heads = 0;  // 0: heads (multi-head attention); heads % kv_heads == 0
  // Probability of dropping an attention weight, in [0, 1).
  float dropout = 0.0f;
  uint64_t seed = 0;
  uint64_t offset = 0;
  // Each position attends only to itself and earlier positions.
  bool causal = true;
  // qkv, out and their gradients are (T, B, ·) instead of (B, T, ·).
  bool sequence_major = false;
  // A block of a longer sequence (context parallelism): query row t stands
  // at position query_position + t and key row j at key_position + j of a
  // sequence of `sequence` positions (0: the call's own T, both positions 0).
  // The causal mask compares these positions (a query sees the keys at or
  // before its own; query_position >= key_position, so every query sees
  // one), and dropout draws entry (b, h, t, j) at stream number
  // offset + ((b·H + h)·S + query_position + t)·S + key_position + j, S the
  // sequence: a sequence computed block by block draws the masks of the
  // whole. CPU kernels only.
  int64_t sequence = 0;
  int64_t query_position = 0;
  int64_t key_position = 0;
  // On a GPU, cuDNN's fused attention where it takes the call (bf16, no
  // dropout, multi-head or multi-query, head widths a multiple of 8 up to
  // 128; see attention_path); false: weft's own kernels always (the
  // environment variable WEFT_CUDNN=off does this for a whole process).
  bool cudnn = true;
};

// What forward leaves for backward; the caller owns it, one per call in
// flight. Tensors already here with the right shape and dtype are overwritten
// rather than reallocated, so passing the same AttentionSaved every step
// allocates nothing (pass a fresh one to keep an older result).
struct AttentionSaved {
  // (B,H,T) f32: log Σ_j e^(s_tj) of each row over its visible positions,
  // s = q·k/√D (the softmax's normalizer; P = e^(s - lse)).
  Tensor lse;
  // The forward's output, the caller's tensor itself (not a copy): backward
  // reads it (Σ_k dO·O per row), so it must not change until then. For a
  // block of a longer sequence (AttentionConfig::sequence) whose rows see
  // keys elsewhere too, backward gives the block's share of the gradients of
  // the whole attention when out, lse and probs are the whole rows' (the
  // merged output and log-sum-exp, probs rescaled by e^(lse_block - lse)).
  Tensor out;
  // (B,H,T,T) f32: the probabilities P (before dropout, 0 where masked), kept
  // by the CPU forward for sequences of at most 128 positions (undefined
  // otherwise, and on CUDA).
  Tensor probs;
  // The kernels the forward ran (attention_path's names); backward runs the
  // same family where it can.
  const char* kernels = nullptr;
};

// Scratch memory of the attention kernels, grown when a call needs more and
// otherwise reused: keep one per calling thread (never share one between
// concurrent calls) so that steady-state calls allocate nothing.
struct AttentionWorkspace {
  Tensor buffer;
};

// qkv (B,T,(H+2·Hkv)·D) -> out (B,T,C), C = H·D; saved.lse (B,H,T), saved.out = out
// (qkv (T,B,·) -> out (T,B,C) when sequence_major)
void attention_forward(const ExecContext& ec, const Tensor& qkv, const AttentionConfig& config,
                       Tensor& out, AttentionSaved& saved, AttentionWorkspace& workspace);
// dout (B,T,C), qkv (B,T,(H+2·Hkv)·D), saved from the forward of the same qkv
// and config -> dqkv of qkv's shape (overwritten); (T,B,·) when sequence_major
void attention_backward(const ExecContext& ec, const Tensor& dout, const Tensor& qkv,
                        const AttentionSaved& saved, const AttentionConfig& config, Tensor& dqkv,
                        AttentionWorkspace& workspace);

// Generation with a key/value cache (infer/): the S new rows of a batch-major
// qkv (B, S, (H + 2·Hkv)·D), q and k already rotated where the model rotates,
// are positions start[b] .. start[b] + S - 1 of batch entry b. The caches k
// and v are (B, Hkv, L, D): entry b's key/value head g at position p is row
// p of the (L, D) matrix [b, g] (positions of a head contiguous, so a query
// reads its keys as one dense block). qkv and the caches share one dtype (f32
// or bf16); config.dropout must be 0 and config.causal true, batch-major only.

// Writes the new rows' keys and values into the caches at their positions
// (start[b] + S <= L for every b; the other positions are left as they are).
void kv_cache_write(const ExecContext& ec, const Tensor& qkv, std::span<const int64_t> start,
                    const AttentionConfig& config, Tensor& k_cache, Tensor& v_cache);
// q of qkv's new rows against the cached keys and values:
//   out (B, S, H·D): row s of entry b attends to cache positions 0 .. start[b] + s
// (which kv_cache_write filled), softmax and products accumulated in f32.
// Written for a few query rows (one per step while generating): each (b, h)
// runs its rows over the keys with dot products, no GEMM.
void attention_decode(const ExecContext& ec, const Tensor& qkv, std::span<const int64_t> start,
                      const AttentionConfig& config, const Tensor& k_cache, const Tensor& v_cache,
                      Tensor& out, AttentionWorkspace& workspace);

// Which kernels a call on `device` with this dtype, head size and config
// runs: "cpu" (the fused CPU kernels), "cuDNN" (a GPU call cuDNN's fused
// attention takes, where libcudnn loads: bf16, no dropout, kv_heads 0, 1 or
// heads, head widths a multiple of 8 up to 128, 16-byte aligned tensors,
// unless cuDNN refuses the shape when it is first built), "tensor cores"
// (other bf16 heads of 16, 32, 64 or 128 on a GPU) or "CUDA cores" (every
// other GPU case). AttentionSaved::kernels names what a forward ran. For
// reports and tests.
const char* attention_path(Device device, DType dtype, int64_t head_dim,
                           const AttentionConfig& config = {});
// On a GPU: "cuDNN 9.x.y (frontend a.b.c)" where cuDNN's attention is on,
// else "off: " and why. "cpu" on the CPU.
std::string attention_cudnn_status(Device device);

// The dropout mask of a forward with this config over `batch` sequences of
// `seq` positions (a block's rows and keys, with config.sequence): (B,H,T,T) u8, 1 where an
// attention weight was kept, 0 where it was dropped or masked (future position); undefined when
// config.dropout is 0. The kernels never store it: this regenerates it from the stream, for
// inspection and tests.
Tensor attention_dropout_mask(const ExecContext& ec, const AttentionConfig& config, int64_t batch,
                              int64_t seq);

}  // namespace weft::kernels
