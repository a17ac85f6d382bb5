#include "weft/parallel/pipeline/executor.h"

#include <chrono>
#include <map>
#include <tuple>

#include "weft/core/error.h"

namespace weft::parallel::pipeline {

PipelineLinks PipelineLinks::create(comm::ProcessGroup& world,
                                    const std::vector<std::vector<int>>& pp_groups) {
  PipelineLinks links;
  WEFT_CHECK(!pp_groups.empty(), "pipeline links: no pipeline groups");
  const int P = static_cast<int>(pp_groups.front().size());
  links.size = P;
  for (const auto& g : pp_groups) {
    WEFT_CHECK(static_cast<int>(g.size()) == P, "pipeline groups of different sizes");
    for (int i = 0; i < P; ++i) {
      if (g[static_cast<size_t>(i)] == world.rank()) links.rank = i;
    }
  }
  if (P == 1) return links;
  // Link j of a kind joins pipeline ranks j and j+1 (mod P), its sender first.
  for (int j = 0; j < P; ++j) {
    const int next = (j + 1) % P;
    std::vector<std::vector<int>> acts, grads;
    for (const auto& g : pp_groups) {
      acts.push_back({g[static_cast<size_t>(j)], g[static_cast<size_t>(next)]});
      grads.push_back({g[static_cast<size_t>(next)], g[static_cast<size_t>(j)]});
    }
    auto a = world.new_subgroups_by_enumeration(acts, format("pp-activations-{}", j));
    auto b = world.new_subgroups_by_enumeration(grads, format("pp-grads-{}", j));
    if (links.rank == j) {
      links.activation_out = a;
      links.grad_in = b;
    }
    if (links.rank == next) {
      links.activation_in = a;
      links.grad_out = b;
    }
  }
  return links;
}

namespace {

using Clock = std::chrono::steady_clock;
using Key = std::tuple<int, int, bool>;  // micro-batch, stage, gradient

struct Posted {
  Tensor tensor;
  comm::Work work;
};

class Runner {
 public:
  Runner(const PipelineSchedule& s, const PipelineLinks& links, const StageCallbacks& cb)
      : s_(s), links_(links), cb_(cb), list_(s.actions[static_cast<size_t>(links.rank)]) {
    WEFT_CHECK(links.size == s.ranks, "pipeline schedule for {} ranks on a pipeline of {}", s.ranks,
               links.size);
  }

  ExecutorStats run() {
    const auto start = Clock::now();
    post_receives(next_compute(0));
    for (size_t i = 0; i < list_.size(); ++i) {
      const Action& a = list_[i];
      if (is_compute(a.kind)) {
        post_receives(next_compute(i + 1));
        compute(a);
      } else if (a.kind == ActionKind::send_activation || a.kind == ActionKind::send_grad) {
        send(a);
      }
    }
    for (auto& [key, p] : sends_) wait(p, key, true);
    sends_.clear();
    stats_.total_s = std::chrono::duration<double>(Clock::now() - start).count();
    return stats_;
  }

 private:
  size_t next_compute(size_t from) const {
    while (from < list_.size() && !is_compute(list_[from].kind)) ++from;
    return from;
  }

  bool local(const Action& a) const { return a.peer == links_.rank; }

  void post_receives(size_t end) {
    for (; posted_ < end; ++posted_) {
      const Action& a = list_[posted_];
      if (a.kind != ActionKind::recv_activation && a.kind != ActionKind::recv_grad) continue;
      const bool grad = a.kind == ActionKind::recv_grad;
      if (local(a)) continue;  // handed over in memory by the send
      Tensor buf = cb_.buffer(a.microbatch, a.stage, grad);
      comm::Work w = (grad ? links_.grad_in : links_.activation_in)->recv(buf, 0);
      recvs_[{a.microbatch, a.stage, grad}] = {buf, w};
    }
  }

  [[noreturn]] void fail(const Key& key, bool sending, const std::string& why) const {
    const auto [m, stage, grad] = key;
    // Activations flow to the next stage, gradients to the previous one.
    const int other = grad != sending ? stage + 1 : stage - 1;
    WEFT_FAIL(
        "pipeline stage {} (pipeline rank {}): {} the {} of micro-batch {} {} stage {} "
        "failed: {}",
        stage, links_.rank, sending ? "sending" : "receiving", grad ? "gradient" : "activation", m,
        sending ? "to" : "from", other, why);
  }

  void wait(Posted& p, const Key& key, bool sending) const {
    try {
      p.work.wait();
    } catch (const Error& e) {
      fail(key, sending, e.what());
    }
  }

  // The received input of (m, stage): the activation, or the output's gradient.
  Tensor take(int m, int stage, bool grad) {
    const Key key{m, stage, grad};
    if (auto it = handed_.find(key); it != handed_.end()) {
      Tensor t = it->second;
      handed_.erase(it);
      return t;
    }
    auto it = recvs_.find(key);
    if (it == recvs_.end()) fail(key, false, "the schedule posts no receive for it");
    wait(it->second, key, false);
    Tensor t = it->second.tensor;
    recvs_.erase(it);
    return t;
  }

  void compute(const Action& a) {
    const int S = s_.stages();
    const int m = a.microbatch, st = a.stage;
    const auto t0 = Clock::now();
    switch (a.kind) {
      case ActionKind::forward: {
        const Tensor in = st > 0 ? take(m, st, false) : Tensor();
        Tensor out = cb_.forward(m, st, in);
        if (st < S - 1) outputs_[{m, st, false}] = out;
        break;
      }
      case ActionKind::backward:
      case ActionKind::backward_input: {
        const Tensor dy = st < S - 1 ? take(m, st, true) : Tensor();
        Tensor dx = a.kind == ActionKind::backward ? cb_.backward(m, st, dy)
                                                   : cb_.backward_input(m, st, dy);
        if (st > 0) outputs_[{m, st, true}] = dx;
        break;
      }
      case ActionKind::backward_weight: cb_.backward_weight(m, st); break;
      default: break;
    }
    stats_.busy_s += std::chrono::duration<double>(Clock::now() - t0).count();
  }

  void send(const Action& a) {
    const bool grad = a.kind == ActionKind::send_grad;
    const Key key{a.microbatch, a.stage, grad};
    auto it = outputs_.find(key);
    if (it == outputs_.end()) fail(key, true, "nothing was computed to send");
    Tensor t = it->second;
    outputs_.erase(it);
    if (local(a)) {
      handed_[{a.microbatch, grad ? a.stage - 1 : a.stage + 1, grad}] = t;
      return;
    }
    comm::Work w = (grad ? links_.grad_out : links_.activation_out)->send(t, 1);
    sends_.emplace_back(key, Posted{t, w});
    // Finished sends release their tensors as the step goes.
    while (!sends_.empty() && sends_.front().second.work.is_completed()) {
      wait(sends_.front().second, sends_.front().first, true);
      sends_.erase(sends_.begin());
    }
  }

  const PipelineSchedule& s_;
  const PipelineLinks& links_;
  const StageCallbacks& cb_;
  const std::vector<Action>& list_;
  size_t posted_ = 0;
  std::map<Key, Posted> recvs_;
  std::map<Key, Tensor> outputs_;
  std::map<Key, Tensor> handed_;  // transfers between chunks of this rank
  std::vector<std::pair<Key, Posted>> sends_;
  ExecutorStats stats_;
};

}  // namespace

ExecutorStats run_schedule(const PipelineSchedule& schedule, const PipelineLinks& links,
                           const StageCallbacks& callbacks) {
  return Runner(schedule, links, callbacks).run();
}

}  // namespace weft::parallel::pipeline
