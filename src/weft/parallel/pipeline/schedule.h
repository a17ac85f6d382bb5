// Pipeline schedules as data: for P ranks, V virtual stages per rank and M
// micro-batches, each rank's ordered list of actions — the forward and the
// backward of micro-batch m on stage s, and the transfers between stages.
// Nothing here knows a model; simulate.h checks a schedule and times it, the
// executor runs a model's stage through it.
//
// Stages: S = P·V, numbered along the model. Stage s lives on rank s % P as
// that rank's chunk s / P (Megatron's interleaving: rank r holds the chunks
// r, r+P, r+2P, ...). With V = 1 stage s is rank s.
//
// Transfers: F(m, s) is preceded by recv_activation(m, s) from the rank of
// s-1 (s > 0) and followed by send_activation(m, s) to the rank of s+1
// (s < S-1); the backward (B, or BI under zero-bubble) of (m, s) is preceded
// by recv_grad(m, s) from the rank of s+1 and followed by send_grad(m, s) to
// the rank of s-1. A message is named by the stage that produced it (an
// activation) or that consumes its gradient's output (a gradient): the
// receiver's recv names its own stage. Each (sender, receiver, kind) pair is
// one first-in-first-out channel; the generators below keep each channel's
// sends and receives in the same order (simulate() checks it).
//
//   gpipe        all forwards, then all backwards (micro-batch order).
//   1f1b         warm-up min(P-r-1, M) forwards, then one forward one
//                backward, then the remaining backwards: at most P-r
//                micro-batches' activations alive on rank r.
//   interleaved  Megatron's interleaved 1F1B over V chunks per rank;
//                M a multiple of P.
//   zero-bubble  ZB-H1 (Qi et al. 2023): the backward split into the input
//                gradient (BI, on the critical path) and the weight gradient
//                (BW, deferred into the bubbles); at most P micro-batches
//                alive (forward done, BW not) on any rank, 1F1B's bound.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace weft::parallel::pipeline {

enum class ScheduleKind : uint8_t { gpipe, one_f_one_b, interleaved, zero_bubble };
// "gpipe", "1f1b", "interleaved", "zero-bubble"
std::string_view schedule_kind_name(ScheduleKind kind);
// The inverse of schedule_kind_name; throws weft::Error naming the choices.
ScheduleKind parse_schedule_kind(std::string_view name);

enum class ActionKind : uint8_t {
  forward,
  backward,         // input and weight gradients together
  backward_input,   // zero-bubble: the input gradient (what the previous stage waits for)
  backward_weight,  // zero-bubble: the weight gradient of an earlier backward_input
  send_activation,
  recv_activation,
  send_grad,
  recv_grad,
};
// "F", "B", "BI", "BW", "SA", "RA", "SG", "RG"
std::string_view action_kind_name(ActionKind kind);
bool is_compute(ActionKind kind);

struct Action {
  ActionKind kind = ActionKind::forward;
  int microbatch = 0;
  int stage = 0;  // the global stage this action belongs to (see above)
  int peer = -1;  // send/recv: the other rank; -1 for compute
  bool operator==(const Action&) const = default;
};
// "F3@s1", "SA3@s1->2", "RG0@s0<-1"
std::string action_str(const Action& a);

struct PipelineSchedule {
  ScheduleKind kind = ScheduleKind::one_f_one_b;
  int ranks = 1;
  int virtual_stages = 1;
  int microbatches = 1;
  std::vector<std::vector<Action>> actions;  // per rank, in execution order

  int stages() const { return ranks * virtual_stages; }
  int rank_of_stage(int stage) const { return stage % ranks; }
  int chunk_of_stage(int stage) const { return stage / ranks; }
  // True when the backward is split into backward_input and backward_weight.
  bool split_backward() const { return kind == ScheduleKind::zero_bubble; }
};

// Empty when `kind` can run P ranks × V virtual stages × M micro-batches;
// otherwise one line saying what is wrong and what would work, naming the
// options as the CLI spells them (--pp, --vpp, --grad-accum).
std::string layout_problem(ScheduleKind kind, int ranks, int virtual_stages, int microbatches);

// The schedule's action lists; throws weft::Error with layout_problem()'s line.
PipelineSchedule make_schedule(ScheduleKind kind, int ranks, int virtual_stages, int microbatches);

// Relative compute costs of one stage's passes (the whole backward is
// backward_input + backward_weight). The default is the usual F : B = 1 : 2.
struct ComputeCosts {
  double forward = 1.0;
  double backward_input = 1.0;
  double backward_weight = 1.0;
  double backward() const { return backward_input + backward_weight; }
};

// The theoretical bubble as the share of the step a rank sits idle, with
// free transfers: (P-1)/(M+P-1) for gpipe and 1f1b, (P-1)/(V·M+P-1) for
// interleaved (Megatron's (P-1)/(V·M) of the ideal time), and for
// zero-bubble (P-1)(F+BI-BW) / (M(F+BI+BW) + (P-1)(F+BI-BW)) (ZB-H1).
double theoretical_bubble(ScheduleKind kind, int ranks, int virtual_stages, int microbatches,
                          const ComputeCosts& costs = {});

}  // namespace weft::parallel::pipeline
