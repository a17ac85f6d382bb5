// The cost model of a layout: one optimizer step's predicted time on each
// rank, from what the step does (GEMM FLOPs, attention, memory-bound passes,
// the bytes of every collective) and what the machine does per second (a
// Machine: measured by probes on a CPU, described for GPUs).
//
//   GEMMs          2·m·n·k per product, forward, input gradient and weight
//                  gradient (×3 of the forward; recomputation adds its
//                  forwards), at the GEMM rate for the product's size
//   attention      causal: 2·T·C/tp multiply-adds per token forward (scores
//                  and weighted sums, half the square), ×3.5 with backward
//   memory-bound   norms, residual adds, activations, dropout, the loss and
//                  AdamW, as bytes read and written at the memory bandwidth,
//                  and a fixed cost per kernel call
//   collectives    ring volumes (all-reduce 2(n-1)/n·S, all-gather and
//                  reduce-scatter (n-1)/n·S, all-to-all (n-1)/n·S) at the
//                  bandwidth of the link the group spans: within a node when
//                  the group's ranks share one (tp varies fastest, then cp,
//                  ep, gtp, pp, dp), across nodes otherwise; plus a latency
//                  per collective
//   overlap        on a GPU, data-parallel gradient reduction overlaps the
//                  backward (the last bucket is exposed); GTP's gathers
//                  overlap the previous layer's GEMMs; the context-parallel
//                  ring overlaps the attention blocks; tensor-parallel
//                  collectives are exposed (weft overlaps them only with
//                  --overlap). On the CPU the local backend's collectives are
//                  copies the computing cores make: nothing overlaps
//   pipeline       the bubble: (P-1)/M of the step for GPipe and 1F1B,
//                  (P-1)/(V·M) interleaved, a third of 1F1B's for ZB-H1
#pragma once

#include <cstdint>
#include <string>

#include "weft/plan/layout.h"
#include "weft/plan/memory_model.h"

namespace weft::plan {

// What one rank's share of the machine does per second.
struct Machine {
  std::string description{};
  bool gpu = false;
  // GEMM FLOP/s per rank at the compute dtype: `gemm_peak` for large
  // products, falling to half of it at `gemm_half_flops` FLOPs per product
  // (rate = peak · f / (f + half)).
  double gemm_peak = 0;
  double gemm_half_flops = 0;
  double attention_flops = 0;   // attention's FLOP/s per rank
  double memory_bandwidth = 0;  // bytes/s per rank for memory-bound passes
  double intra_bandwidth = 0;   // bytes/s per rank to a rank of the same node
  double inter_bandwidth = 0;   // bytes/s per rank to a rank of another node
  int ranks_per_node = 1 << 30;
  double latency_s = 0;      // per collective
  double op_overhead_s = 0;  // the fixed cost of one kernel call
  double peak_flops = 0;     // the dense peak per rank at the compute dtype (MFU)
  double gemm_rate(double flops) const { return gemm_peak * flops / (flops + gemm_half_flops); }
};

// One step's time on the slowest rank, by part (seconds).
struct StepCost {
  double gemm = 0;
  double attention = 0;
  double memory_bound = 0;
  double optimizer = 0;
  double tp_comm = 0;   // exposed
  double cp_comm = 0;   // exposed
  double ep_comm = 0;   // exposed
  double gtp_comm = 0;  // exposed
  double pp_comm = 0;   // exposed
  double dp_comm = 0;   // exposed
  double bubble = 0;
  double total = 0;
  double tokens_per_s = 0;
  // Model FLOPs per token as MFU counts them (6 per parameter, embeddings
  // aside, plus causal attention 6·L·T·C), and MFU over the world's peak.
  double model_flops_per_token = 0;
  double mfu = 0;
};

// The predicted step of `layout` (an invalid layout is the caller's to
// avoid; the planner's enumerator produces valid ones).
StepCost predict_step(const Workload& workload, const Layout& layout, const Machine& machine);

}  // namespace weft::plan
