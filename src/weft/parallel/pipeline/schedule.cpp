#include "weft/parallel/pipeline/schedule.h"

#include <algorithm>

#include "weft/core/error.h"

namespace weft::parallel::pipeline {

std::string_view schedule_kind_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::gpipe: return "gpipe";
    case ScheduleKind::one_f_one_b: return "1f1b";
    case ScheduleKind::interleaved: return "interleaved";
    case ScheduleKind::zero_bubble: return "zero-bubble";
  }
  return "?";
}

ScheduleKind parse_schedule_kind(std::string_view name) {
  for (ScheduleKind k : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::interleaved,
                         ScheduleKind::zero_bubble}) {
    if (name == schedule_kind_name(k)) return k;
  }
  WEFT_FAIL("unknown pipeline schedule '{}': use gpipe, 1f1b, interleaved or zero-bubble", name);
}

std::string_view action_kind_name(ActionKind kind) {
  switch (kind) {
    case ActionKind::forward: return "F";
    case ActionKind::backward: return "B";
    case ActionKind::backward_input: return "BI";
    case ActionKind::backward_weight: return "BW";
    case ActionKind::send_activation: return "SA";
    case ActionKind::recv_activation: return "RA";
    case ActionKind::send_grad: return "SG";
    case ActionKind::recv_grad: return "RG";
  }
  return "?";
}

bool is_compute(ActionKind kind) {
  return kind == ActionKind::forward || kind == ActionKind::backward ||
         kind == ActionKind::backward_input || kind == ActionKind::backward_weight;
}

std::string action_str(const Action& a) {
  std::string s = format("{}{}@s{}", action_kind_name(a.kind), a.microbatch, a.stage);
  if (a.kind == ActionKind::send_activation || a.kind == ActionKind::send_grad) {
    s += format("->{}", a.peer);
  } else if (a.kind == ActionKind::recv_activation || a.kind == ActionKind::recv_grad) {
    s += format("<-{}", a.peer);
  }
  return s;
}

std::string layout_problem(ScheduleKind kind, int ranks, int virtual_stages, int microbatches) {
  if (ranks < 1) return format("--pp {} must be at least 1", ranks);
  if (microbatches < 1) return format("--grad-accum {} must be at least 1", microbatches);
  if (virtual_stages < 1) return format("--vpp {} must be at least 1", virtual_stages);
  if (kind != ScheduleKind::interleaved && virtual_stages != 1) {
    return format(
        "--vpp {} needs --pp-schedule interleaved (the {} schedule runs one stage per rank): "
        "drop --vpp or use --pp-schedule interleaved",
        virtual_stages, schedule_kind_name(kind));
  }
  if (kind == ScheduleKind::interleaved && microbatches % ranks != 0) {
    const int lower = microbatches / ranks * ranks;
    return format(
        "--pp-schedule interleaved needs --grad-accum (micro-batches) a multiple of --pp {}, "
        "not {}: use {}",
        ranks, microbatches,
        lower > 0 ? format("{} or {}", lower, lower + ranks) : format("{}", ranks));
  }
  return {};
}

namespace {

using Order = std::vector<std::vector<Action>>;  // compute actions per rank

Action compute(ActionKind kind, int m, int stage) {
  return Action{.kind = kind, .microbatch = m, .stage = stage, .peer = -1};
}

Order gpipe_order(int P, int M) {
  Order order(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) {
    for (int m = 0; m < M; ++m) order[r].push_back(compute(ActionKind::forward, m, r));
    for (int m = 0; m < M; ++m) order[r].push_back(compute(ActionKind::backward, m, r));
  }
  return order;
}

Order one_f_one_b_order(int P, int M) {
  Order order(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) {
    const int warmup = std::min(P - r - 1, M);
    auto& o = order[r];
    for (int m = 0; m < warmup; ++m) o.push_back(compute(ActionKind::forward, m, r));
    for (int i = 0; i < M - warmup; ++i) {
      o.push_back(compute(ActionKind::forward, warmup + i, r));
      o.push_back(compute(ActionKind::backward, i, r));
    }
    for (int m = M - warmup; m < M; ++m) o.push_back(compute(ActionKind::backward, m, r));
  }
  return order;
}

// Megatron's interleaved schedule: the k-th forward (backward) of a rank
// runs micro-batch (k / PV)·P + k % P on chunk (k % PV) / P (backward: the
// chunks in reverse). Every rank walks the same (micro-batch, chunk)
// sequence, which keeps each channel in order.
Order interleaved_order(int P, int V, int M) {
  Order order(static_cast<size_t>(P));
  const int total = M * V;
  auto microbatch = [&](int k) { return k / (P * V) * P + k % P; };
  auto chunk = [&](int k, bool forward) {
    const int c = k % (P * V) / P;
    return forward ? c : V - 1 - c;
  };
  for (int r = 0; r < P; ++r) {
    int warmup = M == P ? total : std::min((P - r - 1) * 2 + (V - 1) * P, total);
    auto& o = order[r];
    auto fwd = [&](int k) {
      o.push_back(compute(ActionKind::forward, microbatch(k), chunk(k, true) * P + r));
    };
    auto bwd = [&](int k) {
      o.push_back(compute(ActionKind::backward, microbatch(k), chunk(k, false) * P + r));
    };
    for (int k = 0; k < warmup; ++k) fwd(k);
    for (int k = 0; k < total - warmup; ++k) {
      fwd(warmup + k);
      bwd(k);
    }
    for (int k = total - warmup; k < total; ++k) bwd(k);
  }
  return order;
}

// ZB-H1: 1F1B with each backward split into the input gradient (BI) and
// the weight gradient (BW). Rank r runs 1F1B's warm-up, then steady
// forward-BI pairs in which it defers its first r weight gradients (a pair
// runs the oldest deferred BW only once r are pending), then the cool-down
// BIs each followed by a deferred BW, then the BWs left: the deferred BWs
// fill the time 1F1B's rank r waits for gradients. At most P micro-batches
// are alive (forward done, BW not) on any rank, 1F1B's bound.
Order zero_bubble_order(int P, int M) {
  Order order(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) {
    const int warmup = std::min(P - r - 1, M);
    auto& o = order[r];
    int nb = 0, nw = 0;
    auto bi = [&] { o.push_back(compute(ActionKind::backward_input, nb++, r)); };
    auto bw = [&] { o.push_back(compute(ActionKind::backward_weight, nw++, r)); };
    for (int m = 0; m < warmup; ++m) o.push_back(compute(ActionKind::forward, m, r));
    for (int i = 0; i < M - warmup; ++i) {
      o.push_back(compute(ActionKind::forward, warmup + i, r));
      bi();
      if (nb - nw > r) bw();
    }
    while (nb < M) {
      bi();
      bw();
    }
    while (nw < M) bw();
  }
  return order;
}

}  // namespace

PipelineSchedule make_schedule(ScheduleKind kind, int ranks, int virtual_stages, int microbatches) {
  const std::string problem = layout_problem(kind, ranks, virtual_stages, microbatches);
  WEFT_CHECK(problem.empty(), "{}", problem);
  const int P = ranks, V = virtual_stages, M = microbatches;
  Order order;
  switch (kind) {
    case ScheduleKind::gpipe: order = gpipe_order(P, M); break;
    case ScheduleKind::one_f_one_b: order = one_f_one_b_order(P, M); break;
    case ScheduleKind::interleaved: order = interleaved_order(P, V, M); break;
    case ScheduleKind::zero_bubble: order = zero_bubble_order(P, M); break;
  }
  PipelineSchedule s{
      .kind = kind, .ranks = P, .virtual_stages = V, .microbatches = M, .actions = {}};
  const int S = s.stages();
  s.actions.resize(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) {
    auto& out = s.actions[r];
    for (const Action& a : order[r]) {
      const int m = a.microbatch, st = a.stage;
      const bool backward = a.kind == ActionKind::backward || a.kind == ActionKind::backward_input;
      if (a.kind == ActionKind::forward && st > 0) {
        out.push_back({ActionKind::recv_activation, m, st, s.rank_of_stage(st - 1)});
      }
      if (backward && st < S - 1) {
        out.push_back({ActionKind::recv_grad, m, st, s.rank_of_stage(st + 1)});
      }
      out.push_back(a);
      if (a.kind == ActionKind::forward && st < S - 1) {
        out.push_back({ActionKind::send_activation, m, st, s.rank_of_stage(st + 1)});
      }
      if (backward && st > 0) {
        out.push_back({ActionKind::send_grad, m, st, s.rank_of_stage(st - 1)});
      }
    }
  }
  return s;
}

double theoretical_bubble(ScheduleKind kind, int ranks, int virtual_stages, int microbatches,
                          const ComputeCosts& costs) {
  const double P = ranks, V = virtual_stages, M = microbatches;
  switch (kind) {
    case ScheduleKind::gpipe:
    case ScheduleKind::one_f_one_b: return (P - 1) / (M + P - 1);
    case ScheduleKind::interleaved: return (P - 1) / (V * M + P - 1);
    case ScheduleKind::zero_bubble: {
      const double idle =
          (P - 1) * std::max(0.0, costs.forward + costs.backward_input - costs.backward_weight);
      const double work = M * (costs.forward + costs.backward());
      return idle / (work + idle);
    }
  }
  return 0.0;
}

}  // namespace weft::parallel::pipeline
