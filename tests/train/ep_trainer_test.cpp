// The trainer with expert parallelism (--ep): a MoE model (GPT-2 blocks with
// 4 experts, top-2, in every layer; Llama blocks in every other layer) trained at EP 2 and 4 —
// alone, with TP 2 inside the experts (sequence parallelism off, seq and
// batch), with GTP 2, with data parallelism and with gradient
// accumulation — gives the losses, gradient norms (clipping included) and
// weights of EP 1 on as many data ranks over 20 steps; GTP's batched expert
// gathers train bit for bit as one gather per expert; checkpoints saved
// at EP 4 resume at EP 4 bitwise and at EP 2 and 1 (and TP 2) within fp32
// tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "testing.h"
#include "trainer_harness.h"
#include "weft/io/checkpoint_format.h"

namespace weft::train {
namespace {

class EpTrainer : public ::testing::Test {
 protected:
  EpTrainer() : data_(test_text(), 16) {}

  static TrainConfig config(int tp, int ep, int gtp, int64_t micro_batch) {
    TrainConfig c = tiny_config();
    c.model.moe_experts = 4;
    c.model.moe_top_k = 2;
    c.model.moe_every = 1;
    c.model.moe_z_coef = 0.001f;
    c.tp = tp;
    c.ep = ep;
    c.gtp = gtp;
    c.micro_batch = micro_batch;
    c.steps = 20;
    c.grad_clip = 0.5;  // clips: the norm must be the same everywhere
    return c;
  }

  io::Dataset data_;
};

// Each EP layout against EP 1 with the same data ranks (its ep folded into
// dp): the same tokens on every rank, the experts computed elsewhere. (One
// rank with the whole batch is not the reference for a MoE model: the
// load-balancing loss is a product of per-rank means, as in Megatron.)
TEST_F(EpTrainer, EqualsEpOneOnTheSameDataRanks) {
  struct Layout {
    const char* what;
    TrainConfig c;
    int dp;
  };
  TrainConfig accum = config(1, 2, 1, 2);
  accum.grad_accum = 2;
  // Llama blocks (SwiGLU experts, RMSNorm, rotary, GQA), every other layer MoE.
  TrainConfig llama = config(2, 2, 1, 4);
  llama.model.heads = 8;
  llama.model.kv_heads = 4;
  llama.model.hidden = 24;
  llama.model.norm = nn::NormKind::rms;
  llama.model.mlp = nn::MlpKind::swiglu;
  llama.model.positions = nn::PositionKind::rotary;
  llama.model.bias = false;
  llama.model.tied_head = false;
  llama.model.moe_every = 2;
  TrainConfig seq = config(2, 2, 1, 4), batch = config(2, 2, 1, 4);
  seq.sp = nn::SequenceParallel::seq;
  batch.sp = nn::SequenceParallel::batch;
  const Layout layouts[] = {
      {"llama blocks, tp 2 x ep 2", llama, 1}, {"tp 2 x ep 2, sp seq", seq, 1},
      {"tp 2 x ep 2, sp batch", batch, 1},

      {"ep 2", config(1, 2, 1, 4), 1},         {"ep 4", config(1, 4, 1, 2), 1},
      {"tp 2 x ep 4", config(2, 4, 1, 2), 1},  {"ep 4 x gtp 2", config(1, 4, 2, 1), 1},
      {"tp 2 x ep 2", config(2, 2, 1, 4), 1},  {"ep 2 x gtp 2", config(1, 2, 2, 2), 1},
      {"ep 2 x dp 2", config(1, 2, 1, 2), 2},  {"ep 2, accumulating", accum, 1}};
  for (const Layout& l : layouts) {
    SCOPED_TRACE(l.what);
    TrainConfig one = l.c;
    one.ep = 1;
    const RunResult base = run(one, data_, l.dp * l.c.ep);
    EXPECT_LT(base.losses.back(), base.losses.front());
    expect_close(base, run(l.c, data_, l.dp), one.lr_value());
  }
}

TEST_F(EpTrainer, ExpertsLiveOnTheirRanksOnly) {
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    Trainer t(config(1, 2, 1, 4), world, data_);
    const int ep = t.grid().rank_in("ep");
    int experts = 0;
    for (nn::Parameter* p : t.model().parameters()) {
      if (p->name.find(".experts.") == std::string::npos) continue;
      ++experts;
      // h.<l>.mlp.fc<i>.experts.<e>.weight: rank r holds experts 2r and 2r + 1.
      const auto at = p->name.find(".experts.") + 9;
      const int e = std::stoi(p->name.substr(at));
      EXPECT_EQ(e / 2, ep) << p->name;
      EXPECT_EQ(std::count(p->spec.replicated_over.begin(), p->spec.replicated_over.end(), "ep"), 0)
          << p->name;
    }
    EXPECT_EQ(experts, 2 * 2 * 2);  // 2 layers x fc1, fc2 x 2 local experts
    EXPECT_EQ(t.model().parameters_elsewhere().size(), 8u);
  });
}

// Under GTP each expert's weight is sharded over the gtp group like any
// other weight, its gathers running along the prefetch chain.
TEST_F(EpTrainer, GtpShardsEachExpert) {
  comm::run_local(4, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    Trainer t(config(1, 2, 2, 2), world, data_);
    t.step();
    int experts = 0;
    for (nn::Parameter* p : t.model().parameters()) {
      if (p->name.find(".experts.") == std::string::npos) continue;
      ++experts;
      EXPECT_EQ(p->spec.row_group, "gtp") << p->name;
    }
    EXPECT_EQ(experts, 8);
  });
}

// GTP's batched expert gathers (the default: one all-gather and one
// reduce-scatter per MoE layer's GroupedLinear and pass) train bit for bit as
// one gather per expert (--gtp-batch-experts off), with fewer collectives.
TEST_F(EpTrainer, GtpBatchedExpertGathersEqualOneAtATime) {
  TrainConfig batched = config(1, 2, 2, 2);
  batched.steps = 6;
  TrainConfig single = batched;
  single.gtp_batch_experts = false;
  const RunResult a = run(batched, data_), b = run(single, data_);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.grad_norms, b.grad_norms);
  EXPECT_EQ(a.val_loss, b.val_loss);
  ASSERT_EQ(a.params.size(), b.params.size());
  for (const auto& [name, p] : a.params) EXPECT_EQ(p.values, b.params.at(name).values) << name;
}

// FP8 with delayed scaling reaches the experts: each expert has its own amax
// histories; a run at ep 2 trains, and its checkpoint resumes at ep 1, the
// experts the saving rank 0 did not hold starting with fresh scaling state.
TEST_F(EpTrainer, Fp8ExpertsTrainAndResumeAtAnotherEp) {
  const weft::testing::TempDir tmp;
  const std::string dir = tmp.path("ckpt-fp8");
  TrainConfig c = config(1, 2, 1, 4);
  c.precision = parallel::Precision::of(parallel::Recipe::fp8_delayed);
  c.steps = 6;
  std::vector<double> losses;
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    Trainer t(c, world, data_);
    int expert_tensors = 0;
    for (const std::string& n : t.model().context()->scaling->snapshot().names)
      expert_tensors += n.find(".experts.") != std::string::npos;
    EXPECT_GT(expert_tensors, 0);
    while (t.steps_done() < 4) {
      const double loss = t.step().loss;
      if (world.rank() == 0) losses.push_back(loss);
    }
    t.save(dir);
  });
  ASSERT_EQ(losses.size(), 4u);
  EXPECT_LT(losses.back(), losses.front());
  TrainConfig r = c;
  r.ep = 1;
  r.micro_batch = 8;
  r.resume = dir;
  comm::run_local(1, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    Trainer t(r, world, data_);
    EXPECT_EQ(t.steps_done(), 4);
    const double loss = t.step().loss;
    EXPECT_TRUE(std::isfinite(loss));
    EXPECT_LT(loss, losses.front());
  });
}

// Saved at ep 4 after 3 steps; the next step's loss at ep 4 (bitwise), ep 2,
// ep 1 and tp 2 x ep 2 equals the saving run's.
TEST_F(EpTrainer, ResumesAtOtherEpSizes) {
  const weft::testing::TempDir tmp;
  const std::string dir = tmp.path("ckpt-ep4");
  TrainConfig c = config(1, 4, 1, 2);
  double next_saved = 0;
  comm::run_local(4, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    Trainer t(c, world, data_);
    for (int i = 0; i < 3; ++i) t.step();
    t.save(dir);
    const double next = t.step().loss;
    if (world.rank() == 0) next_saved = next;
  });
  io::CheckpointReader ck(dir);
  ASSERT_NE(ck.find("h.1.mlp.fc2.experts.3.weight"), nullptr);
  struct At {
    int tp, ep;
  };
  for (const At at : {At{1, 4}, At{1, 2}, At{1, 1}, At{2, 2}}) {
    SCOPED_TRACE(format("resumed at tp {} x ep {}", at.tp, at.ep));
    TrainConfig r = c;
    r.tp = at.tp;
    r.ep = at.ep;
    r.micro_batch = 8 / at.ep;  // the same global batch
    r.resume = dir;
    double next = 0;
    comm::run_local(at.tp * at.ep, [&](comm::ProcessGroup& world) {
      set_num_threads(1);
      Trainer t(r, world, data_);
      EXPECT_EQ(t.steps_done(), 3);
      const double loss = t.step().loss;
      if (world.rank() == 0) next = loss;
    });
    if (at.ep == 4 && at.tp == 1) {
      EXPECT_EQ(next, next_saved);
    } else {
      EXPECT_NEAR(next, next_saved, 1e-5 * std::abs(next_saved));
    }
  }
}

TEST_F(EpTrainer, RefusesLayoutsItCannotSplit) {
  TrainConfig dense = tiny_config();
  dense.ep = 2;
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    const std::string e = weft::testing::error_of([&] { Trainer t(dense, world, data_); });
    EXPECT_NE(e.find("--ep 2 splits the experts of MoE layers"), std::string::npos) << e;
  });
  TrainConfig three = config(1, 3, 1, 2);
  comm::run_local(3, [&](comm::ProcessGroup& world) {
    const std::string e = weft::testing::error_of([&] { Trainer t(three, world, data_); });
    EXPECT_NE(e.find("do not split over --ep 3"), std::string::npos) << e;
  });
}

}  // namespace
}  // namespace weft::train
