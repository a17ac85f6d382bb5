// The pipeline executor on the local backend, with a model of scalars: stage
// s computes y = w_s · x + s, its input gradient w_s · dy and its weight
// gradient Σ dy · x. Every schedule at several (P, V, M) must move each
// activation and gradient to the right stage and micro-batch: the last
// stage's outputs and every stage's weight gradient equal a sequential
// computation's. A stage that never answers ends the run with an error
// naming the stage and the micro-batch waited for.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "weft/comm/grid.h"
#include "weft/comm/local.h"
#include "weft/core/error.h"
#include "weft/parallel/pipeline/executor.h"

namespace weft::parallel::pipeline {
namespace {

float weight(int stage) { return 1.0f + 0.5f * static_cast<float>(stage); }

Tensor input_of(int m) {
  return Tensor::from({2}, std::vector<float>{static_cast<float>(m + 1), static_cast<float>(m)});
}

struct Outcome {
  std::map<std::pair<int, int>, std::vector<float>> outputs;  // (m, last stage) -> y
  std::map<int, double> weight_grads;                         // stage -> Σ dy·x
};

Outcome sequential(int S, int M) {
  Outcome o;
  for (int m = 0; m < M; ++m) {
    std::vector<float> x = input_of(m).to_vector();
    std::vector<std::vector<float>> inputs;
    for (int s = 0; s < S; ++s) {
      inputs.push_back(x);
      for (float& v : x) v = weight(s) * v + static_cast<float>(s);
    }
    o.outputs[{m, S - 1}] = x;
    std::vector<float> dy(2, 1.0f);
    for (int s = S - 1; s >= 0; --s) {
      for (size_t i = 0; i < 2; ++i) o.weight_grads[s] += dy[i] * inputs[s][i];
      for (float& v : dy) v *= weight(s);
    }
  }
  return o;
}

Outcome pipelined(ScheduleKind kind, int P, int V, int M, int world_size) {
  Outcome out;
  std::mutex mu;
  comm::run_local(world_size, [&](comm::ProcessGroup& world) {
    const comm::GridLayout layout(world.size(), "dp-pp", {{"pp", P}});
    const PipelineLinks links = PipelineLinks::create(world, layout.groups("pp"));
    const PipelineSchedule s = make_schedule(kind, P, V, M);
    const int S = s.stages();
    std::map<std::pair<int, int>, Tensor> saved_x, saved_dy;
    std::map<int, double> grads;
    StageCallbacks cb;
    cb.forward = [&](int m, int st, const Tensor& in) {
      const Tensor x = st == 0 ? input_of(m) : in;
      EXPECT_TRUE(x.defined()) << "stage " << st;
      saved_x[{m, st}] = x;
      std::vector<float> y = x.to_vector();
      for (float& v : y) v = weight(st) * v + static_cast<float>(st);
      if (st == S - 1) {
        std::lock_guard lock(mu);
        if (layout.coord("dp", world.rank()) == 0) out.outputs[{m, st}] = y;
      }
      return Tensor::from({2}, y);
    };
    auto input_grad = [&](int m, int st, const Tensor& dy_in) {
      const Tensor dy = st == S - 1 ? Tensor::from({2}, std::vector<float>{1, 1}) : dy_in;
      saved_dy[{m, st}] = dy;
      std::vector<float> dx = dy.to_vector();
      for (float& v : dx) v *= weight(st);
      return Tensor::from({2}, dx);
    };
    auto weight_grad = [&](int m, int st) {
      const std::vector<float> x = saved_x.at({m, st}).to_vector();
      const std::vector<float> dy = saved_dy.at({m, st}).to_vector();
      for (size_t i = 0; i < 2; ++i) grads[st] += dy[i] * x[i];
      saved_x.erase({m, st});
      saved_dy.erase({m, st});
    };
    cb.backward = [&](int m, int st, const Tensor& dy) {
      Tensor dx = input_grad(m, st, dy);
      weight_grad(m, st);
      return dx;
    };
    cb.backward_input = input_grad;
    cb.backward_weight = weight_grad;
    cb.buffer = [](int, int, bool) { return Tensor::empty({2}); };
    run_schedule(s, links, cb);
    EXPECT_TRUE(saved_x.empty());
    std::lock_guard lock(mu);
    if (layout.coord("dp", world.rank()) == 0) {
      for (const auto& [st, g] : grads) out.weight_grads[st] = g;
    }
  });
  return out;
}

TEST(PipelineExecutor, MovesEveryTensorToItsStage) {
  struct Case {
    ScheduleKind kind;
    int P, V, M;
  };
  const std::vector<Case> cases = {
      {ScheduleKind::gpipe, 2, 1, 3},       {ScheduleKind::one_f_one_b, 2, 1, 4},
      {ScheduleKind::one_f_one_b, 4, 1, 6}, {ScheduleKind::one_f_one_b, 3, 1, 2},
      {ScheduleKind::interleaved, 2, 2, 4}, {ScheduleKind::interleaved, 4, 2, 8},
      {ScheduleKind::interleaved, 1, 3, 2}, {ScheduleKind::zero_bubble, 2, 1, 4},
      {ScheduleKind::zero_bubble, 4, 1, 5},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(format("{} P={} V={} M={}", schedule_kind_name(c.kind), c.P, c.V, c.M));
    const Outcome want = sequential(c.P * c.V, c.M);
    // Alone, and beside a second pipeline (two data-parallel replicas).
    for (int replicas : {1, 2}) {
      const Outcome got = pipelined(c.kind, c.P, c.V, c.M, c.P * replicas);
      EXPECT_EQ(got.outputs, want.outputs);
      ASSERT_EQ(got.weight_grads.size(), want.weight_grads.size());
      for (const auto& [st, g] : want.weight_grads) {
        EXPECT_NEAR(got.weight_grads.at(st), g, 1e-9 * std::abs(g)) << "stage " << st;
      }
    }
  }
}

TEST(PipelineExecutor, AWaitThatTimesOutNamesStageAndMicrobatch) {
  std::string error;
  std::mutex mu;
  try {
    comm::run_local(2, [&](comm::ProcessGroup& world) {
      world.set_timeout(std::chrono::milliseconds(300));
      const comm::GridLayout layout(2, "pp", {{"pp", 2}});
      const PipelineLinks links = PipelineLinks::create(world, layout.groups("pp"));
      // Rank 1 (stage 1) never runs its part, and keeps its groups a while.
      if (links.rank == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        return;
      }
      StageCallbacks cb;
      cb.forward = [](int, int, const Tensor&) { return Tensor::empty({2}); };
      cb.backward = [](int, int, const Tensor&) { return Tensor(); };
      cb.buffer = [](int, int, bool) { return Tensor::empty({2}); };
      run_schedule(make_schedule(ScheduleKind::one_f_one_b, 2, 1, 2), links, cb);
    });
  } catch (const Error& e) {
    std::lock_guard lock(mu);
    error = e.what();
  }
  EXPECT_NE(error.find("pipeline stage 0 (pipeline rank 0): receiving the gradient of "
                       "micro-batch 0 from stage 1 failed"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace weft::parallel::pipeline
