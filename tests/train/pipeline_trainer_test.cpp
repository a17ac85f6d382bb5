// The trainer with pipeline parallelism (--pp, --vpp, --pp-schedule): per-step
// losses, gradient norms (clipping included), the validation loss and the
// final weights at pp 2 and pp 4 equal pp 1's at fp32 tolerance over 12
// steps of 4 micro-batches, for GPT-2 blocks (tied head: the embedding
// group), Llama blocks (untied) and MoE blocks (auxiliary losses summed over
// stages); under every schedule; with TP 2 and with DP 2 around the
// pipeline. Bad layouts are refused with one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>
#include <string>
#include <tuple>

#include "testing.h"
#include "trainer_harness.h"
#include "weft/nn/linear.h"
#include "weft/nn/recompute.h"
#include "weft/train/pipeline_step.h"

namespace weft::train {
namespace {

enum class Family { gpt2, llama, moe };

TrainConfig family_config(Family f) {
  TrainConfig c = tiny_config();
  c.model.layers = 4;
  c.tp = 1;
  c.micro_batch = 2;
  c.grad_accum = 4;
  c.steps = 12;
  c.grad_clip = 0.5;  // clips: the norm must be the same on every stage
  if (f != Family::gpt2) {
    c.model.norm = nn::NormKind::rms;
    c.model.mlp = nn::MlpKind::swiglu;
    c.model.hidden = 96;
    c.model.positions = nn::PositionKind::rotary;
    c.model.kv_heads = 2;
    c.model.bias = false;
    c.model.tied_head = false;
  }
  if (f == Family::moe) {
    c.model.moe_experts = 4;
    c.model.moe_top_k = 2;
    c.model.moe_z_coef = 0.001f;
  }
  return c;
}

class PipelineTrainer : public ::testing::Test {
 protected:
  PipelineTrainer() : data_(test_text(), 16) {}
  io::Dataset data_;
};

TEST_F(PipelineTrainer, EqualsPpOneForEveryFamily) {
  for (Family f : {Family::gpt2, Family::llama, Family::moe}) {
    SCOPED_TRACE(static_cast<int>(f));
    const TrainConfig base = family_config(f);
    const RunResult want = run(base, data_);
    for (int pp : {2, 4}) {
      SCOPED_TRACE(pp);
      TrainConfig c = base;
      c.pp = pp;
      expect_close(run(c, data_), want, c.lr_value());
    }
  }
}

// Dropout: a micro-batch's masks are the same at pp 1 and pp N (the streams
// are set per micro-batch and stage where the unpipelined loop draws).
TEST_F(PipelineTrainer, DropoutMasksEqualPpOne) {
  for (Family f : {Family::gpt2, Family::llama}) {
    SCOPED_TRACE(static_cast<int>(f));
    TrainConfig base = family_config(f);
    base.model.dropout = 0.1f;
    const RunResult want = run(base, data_);
    for (auto [pp, schedule, vpp] :
         {std::tuple{2, "1f1b", 1}, std::tuple{4, "gpipe", 1}, std::tuple{2, "interleaved", 2}}) {
      SCOPED_TRACE(format("pp {} {} vpp {}", pp, schedule, vpp));
      TrainConfig c = base;
      c.pp = pp;
      c.pp_schedule = schedule;
      c.vpp = vpp;
      expect_close(run(c, data_), want, c.lr_value());
    }
  }
}

TEST_F(PipelineTrainer, EverySchedule) {
  const TrainConfig base = family_config(Family::gpt2);
  const RunResult want = run(base, data_);
  struct Layout {
    const char* schedule;
    int pp, vpp;
  };
  for (const Layout& l :
       {Layout{"gpipe", 2, 1}, Layout{"interleaved", 2, 2}, Layout{"zero-bubble", 2, 1},
        Layout{"zero-bubble", 4, 1}, Layout{"interleaved", 1, 2}}) {
    SCOPED_TRACE(format("{} pp {} vpp {}", l.schedule, l.pp, l.vpp));
    TrainConfig c = base;
    c.pp_schedule = l.schedule;
    c.pp = l.pp;
    c.vpp = l.vpp;
    expect_close(run(c, data_), want, c.lr_value());
  }
}

TEST_F(PipelineTrainer, ComposesWithTpAndDp) {
  TrainConfig tp2 = family_config(Family::gpt2);
  tp2.tp = 2;
  const RunResult want_tp = run(tp2, data_);
  TrainConfig c = tp2;
  c.pp = 2;
  expect_close(run(c, data_), want_tp, c.lr_value());
  for (nn::SequenceParallel sp : {nn::SequenceParallel::seq, nn::SequenceParallel::batch}) {
    TrainConfig s = tp2;
    s.sp = sp;
    const RunResult want_sp = run(s, data_);
    s.pp = 2;
    expect_close(run(s, data_), want_sp, c.lr_value());
  }

  const TrainConfig dp = family_config(Family::llama);
  const RunResult want_dp = run(dp, data_, 2);
  TrainConfig d = dp;
  d.pp = 2;
  expect_close(run(d, data_, 2), want_dp, d.lr_value());
}

// Activation recomputation inside stages (--recompute selective|full with
// --pp, dropout on, zero-bubble's deferred weight pass included): the
// recomputed forwards replay their stage's masks, so the run equals pp 1's.
TEST_F(PipelineTrainer, ComposesWithRecompute) {
  TrainConfig base = family_config(Family::gpt2);
  base.model.dropout = 0.1f;
  const RunResult want = run(base, data_);
  for (nn::Recompute mode : {nn::Recompute::selective, nn::Recompute::full}) {
    for (const char* schedule : {"1f1b", "zero-bubble"}) {
      SCOPED_TRACE(format("{} {}", nn::recompute_name(mode), schedule));
      TrainConfig c = base;
      c.pp = 2;
      c.pp_schedule = schedule;
      c.model.recompute = mode;
      expect_close(run(c, data_), want, c.lr_value());
    }
  }
}

TEST_F(PipelineTrainer, StagesHoldTheirLayersWithGlobalNames) {
  TrainConfig c = family_config(Family::llama);
  c.pp = 2;
  c.pp_layers = "1,3";
  c.steps = 1;
  std::mutex mu;
  std::vector<std::vector<std::string>> names(2);
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    Trainer t(c, world, data_);
    std::vector<std::string> mine;
    for (nn::Parameter* p : t.model().parameters()) mine.push_back(p->name);
    std::lock_guard lock(mu);
    names[static_cast<size_t>(t.grid().rank_in("pp"))] = mine;
  });
  auto has = [](const std::vector<std::string>& v, const std::string& prefix) {
    for (const auto& n : v) {
      if (n.rfind(prefix, 0) == 0) return true;
    }
    return false;
  };
  EXPECT_TRUE(has(names[0], "wte."));
  EXPECT_TRUE(has(names[0], "h.0."));
  EXPECT_FALSE(has(names[0], "h.1."));
  EXPECT_FALSE(has(names[0], "lm_head."));
  EXPECT_FALSE(has(names[1], "wte."));
  EXPECT_TRUE(has(names[1], "h.1."));
  EXPECT_TRUE(has(names[1], "h.3."));
  EXPECT_TRUE(has(names[1], "ln_f."));
  EXPECT_TRUE(has(names[1], "lm_head."));
}

TEST_F(PipelineTrainer, RefusesBadLayoutsWithOneLine) {
  auto error_of = [&](TrainConfig c) {
    try {
      validate(c);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  TrainConfig c = family_config(Family::gpt2);
  c.pp = 5;
  EXPECT_EQ(error_of(c),
            "--pp 5 stages is more than the model's 4 layers (--layers): each stage needs at "
            "least one layer; use at most 4 stages");
  c.pp = 2;
  c.pp_layers = "1,2";
  EXPECT_EQ(error_of(c),
            "--pp-layers 1,2 sums to 3 layers, the model has 4 (--layers): give 2 counts that "
            "sum to 4");
  c.pp_layers = "1,2,1";
  EXPECT_EQ(error_of(c), "--pp-layers 1,2,1 gives 3 stages, --pp 2 stages: give 2 counts");
  c.pp_layers = "";
  c.vpp = 2;
  EXPECT_EQ(error_of(c),
            "--vpp 2 needs --pp-schedule interleaved (the 1f1b schedule runs one stage per "
            "rank): drop --vpp or use --pp-schedule interleaved");
  c.pp_schedule = "interleaved";
  c.grad_accum = 3;
  EXPECT_EQ(error_of(c),
            "--pp-schedule interleaved needs --grad-accum (micro-batches) a multiple of --pp 2, "
            "not 3: use 2 or 4");
  c.grad_accum = 4;
  c.vpp = 3;
  EXPECT_EQ(error_of(c),
            "--pp 2 x --vpp 3 = 6 stages is more than the model's 4 layers (--layers): each "
            "stage needs at least one layer; use at most 4 stages");
  c.model.layers = 8;
  EXPECT_EQ(error_of(c),
            "--pp-schedule interleaved splits the model's 8 layers into --pp 2 x --vpp 3 = 6 "
            "stages of equal size, and 6 does not divide 8: choose --pp and --vpp whose product "
            "divides 8 (or give --pp-layers)");
  c.vpp = 2;
  EXPECT_EQ(error_of(c), "");
  // A world --pp does not divide.
  TrainConfig w = family_config(Family::gpt2);
  w.pp = 2;
  std::string world_error;
  try {
    comm::run_local(3, [&](comm::ProcessGroup& world) { Trainer t(w, world, data_); });
  } catch (const Error& e) {
    world_error = e.what();
  }
  EXPECT_NE(world_error.find("the world of 3 ranks is not divisible by --tp 1 x --cp 1 x --ep 1 x "
                             "--gtp 1 x --pp 2"),
            std::string::npos)
      << world_error;
}

// Under --sp seq a stage sends its sequence shard: each activation sent
// between stages is (T/tp, B, C), not the whole (T, B, C).
TEST_F(PipelineTrainer, SequenceParallelSendsTheShardOnly) {
  TrainConfig c = family_config(Family::gpt2);
  c.tp = 2;
  c.pp = 2;
  c.sp = nn::SequenceParallel::seq;
  c.steps = 1;
  std::mutex mu;
  std::vector<int64_t> sent;
  comm::run_local(4, [&](comm::ProcessGroup& world) {
    Trainer t(c, world, data_);
    t.step();
    if (t.grid().rank_in("pp") != 0) return;
    const comm::CommStats stats = t.pipeline()->links.activation_out->stats();
    std::lock_guard lock(mu);
    sent.push_back(stats.bytes_of(comm::OpKind::send));
    EXPECT_EQ(stats.count(comm::OpKind::send), c.grad_accum);
  });
  const int64_t shard = c.model.seq / c.tp * c.micro_batch * c.model.width * 4;
  ASSERT_EQ(sent.size(), 2u);
  for (int64_t b : sent) EXPECT_EQ(b, c.grad_accum * shard);
}

// A step whose loss is not finite stops the run naming the stage and the
// layer where the activations first stopped being finite.
TEST_F(PipelineTrainer, NonFiniteStepNamesStageAndLayer) {
  TrainConfig c = family_config(Family::llama);
  c.pp = 2;
  c.steps = 2;
  std::mutex mu;
  std::vector<std::string> errors;
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    Trainer t(c, world, data_);
    for (nn::Parameter* p : t.model().parameters()) {
      if (p->name == "h.3.mlp.fc1.weight") p->value.data<float>()[0] = std::nanf("");
    }
    try {
      t.step();
    } catch (const Error& e) {
      std::lock_guard lock(mu);
      errors.emplace_back(e.what());
    }
  });
  ASSERT_EQ(errors.size(), 2u);
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("step 1: the training loss is not finite (nan) (pipeline: first not finite "
                     "on stage 1, in layer h.3)"),
              std::string::npos)
        << e;
  }
}

// Zero-bubble's split backward: with weight gradients deferred, a Linear's
// backward leaves its weight and bias gradients untouched and returns the
// same input gradient; the deferred pass then adds exactly what the whole
// backward would have.
TEST(PipelineSplitBackward, LinearDefersItsWeightGradient) {
  const auto context = parallel::make_context();
  nn::Linear whole(context, {.name = "a", .in = 8, .out = 6});
  nn::Linear split(context, {.name = "a", .in = 8, .out = 6});
  const Tensor x = testing::random_tensor({5, 8}, 1);
  const Tensor dy = testing::random_tensor({5, 6}, 2);
  nn::Ctx c1, c2;
  c2.set_defer_weight_grads(true);
  whole.forward(c1, x);
  split.forward(c2, x);
  const std::vector<float> dx1 = whole.backward(c1, dy).to_vector();
  const std::vector<float> dx2 = split.backward(c2, dy).to_vector();
  EXPECT_EQ(dx1, dx2);
  for (nn::Parameter* p : split.parameters()) {
    for (float v : p->grad.to_vector()) ASSERT_EQ(v, 0.0f) << p->name;
  }
  c2.run_deferred_weight_grads();
  const auto pw = whole.parameters(), ps = split.parameters();
  ASSERT_EQ(pw.size(), 2u);
  for (size_t i = 0; i < pw.size(); ++i) {
    EXPECT_EQ(pw[i]->grad.to_vector(), ps[i]->grad.to_vector()) << pw[i]->name;
  }
}

// Steps `steps` of cfg on its ranks from cfg.resume (if set), saving to
// `save` at the end when given; the losses and the final validation loss.
RunResult train_and_save(const TrainConfig& cfg, const io::Dataset& data, int64_t steps,
                         const std::string& save) {
  RunResult out;
  std::mutex mu;
  comm::run_local(cfg.tp * cfg.pp, [&](comm::ProcessGroup& world) {
    Trainer t(cfg, world, data);
    std::vector<double> losses;
    for (int64_t i = 0; i < steps; ++i) losses.push_back(t.step().loss);
    const double val = t.evaluate();
    if (!save.empty()) t.save(save);
    std::lock_guard lock(mu);
    if (world.rank() == 0) {
      out.losses = losses;
      out.val_loss = val;
    }
  });
  return out;
}

TEST_F(PipelineTrainer, CheckpointsLoadAtAnyPpAndTp) {
  const std::string dir = ::testing::TempDir() + "/weft_pp_checkpoint";
  std::filesystem::remove_all(dir);
  for (Family f : {Family::gpt2, Family::llama}) {
    SCOPED_TRACE(static_cast<int>(f));
    TrainConfig c = family_config(f);
    c.steps = 6;
    c.pp = 2;
    // Three steps at pp 2, saved; three more at pp 2 are the reference.
    const RunResult first = train_and_save(c, data_, 3, dir);
    TrainConfig more = c;
    more.resume = dir;
    const RunResult want = train_and_save(more, data_, 3, "");
    // The checkpoint evaluates alike at pp 1 and resumes at pp 4 and at tp 2 x pp 1.
    for (auto [pp, tp] : {std::pair{1, 1}, std::pair{4, 1}, std::pair{1, 2}, std::pair{2, 2}}) {
      SCOPED_TRACE(format("pp {} tp {}", pp, tp));
      TrainConfig r = more;
      r.pp = pp;
      r.tp = tp;
      const RunResult loaded = train_and_save(r, data_, 0, "");
      EXPECT_NEAR(loaded.val_loss, first.val_loss, 1e-5 * first.val_loss);
      const RunResult resumed = train_and_save(r, data_, 3, "");
      ASSERT_EQ(resumed.losses.size(), want.losses.size());
      for (size_t i = 0; i < want.losses.size(); ++i) {
        EXPECT_NEAR(resumed.losses[i], want.losses[i], 1e-5 * want.losses[i]) << "step " << i + 4;
      }
    }
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace weft::train
