// Causal attention over a sequence split by context parallelism
// (parallel/context/chunks.h): each rank holds 2 chunks of c rows of every
// sequence and computes its queries' attention over all keys of the sequence.
// The kernels stay single-rank (kernels/attention.h); this file exchanges
// keys and values between the ranks and merges the partial results.
//
// A block is one local query chunk against one key/value chunk k of the
// sequence: the kernel on a packed tensor of c rows holding the chunk's
// queries and chunk k's keys and values, with the true positions of both
// (AttentionConfig::sequence, query_position, key_position), so the causal
// mask and the dropout stream are the whole sequence's. Blocks whose keys
// all lie after the queries are skipped: each rank runs 2N+1 blocks. The
// blocks of one query chunk are merged by their log-sum-exps:
//
//   lse = log(e^lse_a + e^lse_b),   out = e^(lse_a - lse)·out_a + e^(lse_b - lse)·out_b
//
// and backward runs each block's kernel with the merged output and lse
// (attention_rebase), which gives exactly that block's share of dQ, dK, dV.
//
//   p2p        ring: the key/value pair of chunks travels rank r -> r+1 with
//              send_recv while the blocks of the pair in hand compute; in
//              backward the key/value gradients travel with them and arrive
//              home after N hops.
//   allgather  keys and values all-gathered once (Llama 3's choice), their
//              gradients reduce-scattered.
//   a2a        DeepSpeed-Ulysses: an all-to-all turns the sequence shards of
//              q, k, v into head shards of the whole sequence, the kernel runs
//              once over it, and a second all-to-all turns the output back
//              (heads and KV heads divisible by N).
// Grouped-query attention moves only the KV heads. Host (CPU) tensors only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/comm/process_group.h"
#include "weft/kernels/attention.h"
#include "weft/parallel/context/chunks.h"
#include "weft/parallel/context/options.h"

namespace weft::parallel::context {

// What forward leaves for backward (one per call in flight).
struct AttentionSaved {
  struct Block {
    int chunk;  // the local query chunk (0 or 1)
    int64_t k;  // the key/value chunk of the sequence
    kernels::AttentionSaved saved;
  };
  Tensor qkv;                       // the local qkv
  kernels::AttentionConfig config;  // the caller's (whole sequence)
  std::vector<Block> blocks;        // in the order forward ran them
  Tensor out[2];                    // each local chunk's merged output, qkv's dtype
  Tensor lse[2];                    // and its log-sum-exp (B, H, c) f32
  // a2a: the head shard's qkv of the whole sequence and its kernel state.
  Tensor heads_qkv;
  kernels::AttentionSaved heads;
};

// qkv (B, 2c, (H + 2·Hkv)·D) [(2c, B, ·) when config.sequence_major] of this
// rank's chunks -> out (B, 2c, H·D), the causal attention of the local
// queries over the whole sequence. config: heads, kv_heads, dropout, seed,
// offset, sequence_major as for the whole sequence (its positions fields 0).
void attention_forward(const ExecContext& ec, comm::ProcessGroup& group, CpComm comm,
                       const SequenceChunks& chunks, const Tensor& qkv,
                       const kernels::AttentionConfig& config, Tensor& out, AttentionSaved& saved,
                       kernels::AttentionWorkspace& ws, AttentionTimes* times = nullptr);
// dout of out's shape -> dqkv of qkv's shape (overwritten).
void attention_backward(const ExecContext& ec, comm::ProcessGroup& group, CpComm comm,
                        const SequenceChunks& chunks, const Tensor& dout, AttentionSaved& saved,
                        Tensor& dqkv, kernels::AttentionWorkspace& ws,
                        AttentionTimes* times = nullptr);

}  // namespace weft::parallel::context
