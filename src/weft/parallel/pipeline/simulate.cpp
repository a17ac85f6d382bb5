#include "weft/parallel/pipeline/simulate.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <tuple>

#include "weft/core/error.h"

namespace weft::parallel::pipeline {

double Simulation::bubble() const {
  if (busy.empty() || makespan <= 0.0) return 0.0;
  double total = 0.0;
  for (double b : busy) total += b;
  return 1.0 - total / (static_cast<double>(busy.size()) * makespan);
}

namespace {

struct Message {
  int microbatch;
  int stage;  // the stage that receives it
  double time;
};

// One rank's knowledge of each (micro-batch, stage) it holds.
struct PassState {
  bool received_input = false;
  bool received_grad = false;
  int forward = 0, backward = 0, backward_input = 0, backward_weight = 0;  // times run
};

class Checker {
 public:
  Checker(const PipelineSchedule& s, const ComputeCosts& costs, double transfer)
      : s_(s), costs_(costs), transfer_(transfer), S_(s.stages()) {
    WEFT_CHECK(static_cast<int>(s.actions.size()) == s.ranks,
               "pipeline schedule: {} action lists for {} ranks", s.actions.size(), s.ranks);
    state_.assign(static_cast<size_t>(s.microbatches * S_), PassState{});
    pos_.assign(static_cast<size_t>(s.ranks), 0);
    time_.assign(static_cast<size_t>(s.ranks), 0.0);
    alive_.assign(static_cast<size_t>(s.ranks), 0);
    pending_.assign(static_cast<size_t>(s.ranks), 0);
    sim_.busy.assign(static_cast<size_t>(s.ranks), 0.0);
    sim_.peak_alive.assign(static_cast<size_t>(s.ranks), 0);
    sim_.peak_pending.assign(static_cast<size_t>(s.ranks), 0);
    sim_.timeline.resize(static_cast<size_t>(s.ranks));
  }

  Simulation run() {
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < s_.ranks; ++r) {
        while (pos_[r] < s_.actions[r].size() && step(r)) progress = true;
      }
    }
    report_deadlock();
    finish();
    return std::move(sim_);
  }

 private:
  PassState& at(int m, int stage) { return state_[static_cast<size_t>(m * S_ + stage)]; }

  [[noreturn]] void fail(int r, const Action& a, const std::string& why) const {
    WEFT_FAIL("{} schedule (pp {}, vpp {}, {} micro-batches): rank {} action {} ({}): {}",
              schedule_kind_name(s_.kind), s_.ranks, s_.virtual_stages, s_.microbatches, r, pos_[r],
              action_str(a), why);
  }

  std::deque<Message>& channel(int src, int dst, bool grad) { return channels_[{src, dst, grad}]; }

  // Runs rank r's next action; false when it must wait for a message.
  bool step(int r) {
    const Action& a = s_.actions[r][pos_[r]];
    if (a.microbatch < 0 || a.microbatch >= s_.microbatches || a.stage < 0 || a.stage >= S_) {
      fail(r, a, "micro-batch or stage out of range");
    }
    if (s_.rank_of_stage(a.stage) != r) {
      fail(r, a, format("stage {} belongs to rank {}", a.stage, s_.rank_of_stage(a.stage)));
    }
    PassState& p = at(a.microbatch, a.stage);
    const bool split = s_.split_backward();
    switch (a.kind) {
      case ActionKind::recv_activation:
      case ActionKind::recv_grad: {
        const bool grad = a.kind == ActionKind::recv_grad;
        const int from = grad ? a.stage + 1 : a.stage - 1;
        if (from < 0 || from >= S_) fail(r, a, "no stage to receive from");
        if (a.peer != s_.rank_of_stage(from)) {
          fail(r, a, format("stage {} is on rank {}", from, s_.rank_of_stage(from)));
        }
        auto& ch = channel(a.peer, r, grad);
        if (ch.empty()) return false;
        const Message msg = ch.front();
        if (msg.microbatch != a.microbatch || msg.stage != a.stage) {
          fail(r, a,
               format("the channel from rank {} holds micro-batch {} for stage {} first: the "
                      "two ends post in different orders",
                      a.peer, msg.microbatch, msg.stage));
        }
        ch.pop_front();
        time_[r] = std::max(time_[r], msg.time);
        (grad ? p.received_grad : p.received_input) = true;
        break;
      }
      case ActionKind::send_activation:
      case ActionKind::send_grad: {
        const bool grad = a.kind == ActionKind::send_grad;
        const int to = grad ? a.stage - 1 : a.stage + 1;
        if (to < 0 || to >= S_) fail(r, a, "no stage to send to");
        if (a.peer != s_.rank_of_stage(to)) {
          fail(r, a, format("stage {} is on rank {}", to, s_.rank_of_stage(to)));
        }
        const bool computed = grad ? (p.backward + p.backward_input) > 0 : p.forward > 0;
        if (!computed) fail(r, a, "sends what this rank has not computed yet");
        channel(r, a.peer, grad).push_back({a.microbatch, to, time_[r] + transfer_});
        break;
      }
      case ActionKind::forward:
        if (p.forward) fail(r, a, "forward run twice");
        if (a.stage > 0 && !p.received_input) fail(r, a, "forward before its input was received");
        ++p.forward;
        run_compute(r, a, costs_.forward, +1, +1);
        break;
      case ActionKind::backward:
        if (split) fail(r, a, "this schedule splits the backward into BI and BW");
        if (p.backward) fail(r, a, "backward run twice");
        check_backward_ready(r, a, p);
        ++p.backward;
        run_compute(r, a, costs_.backward(), -1, -1);
        break;
      case ActionKind::backward_input:
        if (!split) fail(r, a, "this schedule runs whole backwards");
        if (p.backward_input) fail(r, a, "input gradient run twice");
        check_backward_ready(r, a, p);
        ++p.backward_input;
        run_compute(r, a, costs_.backward_input, -1, 0);
        break;
      case ActionKind::backward_weight:
        if (!split) fail(r, a, "this schedule runs whole backwards");
        if (p.backward_weight) fail(r, a, "weight gradient run twice");
        if (!p.backward_input) fail(r, a, "weight gradient before its input gradient");
        ++p.backward_weight;
        run_compute(r, a, costs_.backward_weight, 0, -1);
        break;
    }
    ++pos_[r];
    return true;
  }

  void check_backward_ready(int r, const Action& a, const PassState& p) {
    if (!p.forward) fail(r, a, "backward before its forward on the same stage");
    if (a.stage < S_ - 1 && !p.received_grad) {
      fail(r, a, "backward before its output gradient was received");
    }
  }

  void run_compute(int r, const Action& a, double cost, int alive, int pending) {
    const double start = time_[r];
    time_[r] = start + cost;
    sim_.busy[r] += cost;
    sim_.timeline[r].push_back({a, start, time_[r]});
    alive_[r] += alive;
    pending_[r] += pending;
    sim_.peak_alive[r] = std::max(sim_.peak_alive[r], alive_[r]);
    sim_.peak_pending[r] = std::max(sim_.peak_pending[r], pending_[r]);
  }

  void report_deadlock() const {
    std::string waits;
    for (int r = 0; r < s_.ranks; ++r) {
      if (pos_[r] >= s_.actions[r].size()) continue;
      if (!waits.empty()) waits += "; ";
      waits +=
          format("rank {} waits at action {} ({})", r, pos_[r], action_str(s_.actions[r][pos_[r]]));
    }
    WEFT_CHECK(waits.empty(), "{} schedule (pp {}, vpp {}, {} micro-batches) deadlocks: {}",
               schedule_kind_name(s_.kind), s_.ranks, s_.virtual_stages, s_.microbatches, waits);
  }

  void finish() {
    const bool split = s_.split_backward();
    for (int m = 0; m < s_.microbatches; ++m) {
      for (int st = 0; st < S_; ++st) {
        const PassState& p = at(m, st);
        const bool complete =
            p.forward == 1 &&
            (split ? p.backward_input == 1 && p.backward_weight == 1 : p.backward == 1);
        WEFT_CHECK(complete,
                   "{} schedule (pp {}, vpp {}, {} micro-batches): micro-batch {} on stage {} "
                   "(rank {}) misses a pass",
                   schedule_kind_name(s_.kind), s_.ranks, s_.virtual_stages, s_.microbatches, m, st,
                   s_.rank_of_stage(st));
      }
    }
    for (const auto& [key, ch] : channels_) {
      WEFT_CHECK(ch.empty(), "{} schedule: {} message(s) from rank {} to rank {} never received",
                 schedule_kind_name(s_.kind), ch.size(), std::get<0>(key), std::get<1>(key));
    }
    for (double t : time_) sim_.makespan = std::max(sim_.makespan, t);
  }

  const PipelineSchedule& s_;
  ComputeCosts costs_;
  double transfer_;
  int S_;
  std::vector<PassState> state_;
  std::vector<size_t> pos_;
  std::vector<double> time_;
  std::vector<int> alive_, pending_;
  std::map<std::tuple<int, int, bool>, std::deque<Message>> channels_;
  Simulation sim_;
};

std::string label(const PipelineSchedule& s, const Action& a) {
  std::string k;
  switch (a.kind) {
    case ActionKind::forward: k = "F"; break;
    case ActionKind::backward: k = "B"; break;
    case ActionKind::backward_input: k = "I"; break;
    case ActionKind::backward_weight: k = "W"; break;
    default: k = "?"; break;
  }
  k += format("{}", a.microbatch);
  if (s.virtual_stages > 1) k += format(".{}", s.chunk_of_stage(a.stage));
  return k;
}

}  // namespace

Simulation simulate(const PipelineSchedule& schedule, const ComputeCosts& costs, double transfer) {
  return Checker(schedule, costs, transfer).run();
}

std::string format_timeline(const PipelineSchedule& s, const Simulation& sim) {
  double quantum = 0.0;
  size_t width = 1;
  for (const auto& row : sim.timeline) {
    for (const TimedAction& t : row) {
      const double cost = t.end - t.start;
      if (cost > 0 && (quantum == 0.0 || cost < quantum)) quantum = cost;
      width = std::max(width, label(s, t.action).size());
    }
  }
  if (quantum == 0.0) return {};
  const auto cell = [&](double t) { return static_cast<size_t>(std::llround(t / quantum)); };
  const size_t columns = cell(sim.makespan);
  std::string out;
  for (int r = 0; r < s.ranks; ++r) {
    std::vector<std::string> cells(columns, ".");
    for (const TimedAction& t : sim.timeline[r]) {
      const size_t a = cell(t.start), b = std::max(cell(t.end), a + 1);
      for (size_t c = a; c < b && c < columns; ++c) cells[c] = c == a ? label(s, t.action) : "-";
    }
    out += format("rank {} |", r);
    for (const std::string& c : cells) out += " " + c + std::string(width - c.size(), ' ');
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += "\n";
  }
  return out;
}

}  // namespace weft::parallel::pipeline
