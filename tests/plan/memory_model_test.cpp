// The memory model's terms as formulas: parameter counts against a built
// model, the pipeline schedules' in-flight bounds, recomputation, the
// distributed optimizer, sequence and context parallelism.
#include "weft/plan/memory_model.h"

#include <gtest/gtest.h>

#include <mutex>

#include "weft/comm/world.h"
#include "weft/nn/gpt.h"
#include "weft/train/config.h"

namespace weft::plan {
namespace {

Workload workload(const std::string& preset, int64_t seq = 64) {
  Workload w;
  w.model = nn::gpt_preset(preset);
  w.model.seq = seq;
  return w;
}

struct Built {
  int64_t elements = 0;
  int64_t tensors = 0;
};

// Rank 0's parameters of the model built at `tp` (local ranks).
Built built_parameters(const nn::GptConfig& model, int tp) {
  train::TrainConfig cfg;
  cfg.model = model;
  cfg.tp = tp;
  Built out;
  std::mutex mu;
  comm::run_world(tp, [&](comm::ProcessGroup& world) {
    std::shared_ptr<comm::ProcessGroup> group =
        tp > 1 ? world.new_subgroups_by_enumeration({[&] {
                                                      std::vector<int> all;
                                                      for (int r = 0; r < tp; ++r) all.push_back(r);
                                                      return all;
                                                    }()},
                                                    "tp")
               : nullptr;
    nn::Gpt gpt(train::model_context(cfg, group), train::model_config(cfg));
    Built b;
    for (nn::Parameter* p : gpt.parameters()) {
      b.elements += p->value.numel();
      ++b.tensors;
    }
    std::lock_guard<std::mutex> lock(mu);
    if (world.rank() == 0) out = b;
  });
  return out;
}

class ParameterCountTest : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(ParameterCountTest, MatchesTheBuiltModel) {
  const auto& [preset, tp] = GetParam();
  const Workload w = workload(preset);
  const ParameterCount p = MemoryModel(w).parameters(Layout{.tp = tp}, 0);
  const Built b = built_parameters(w.model, tp);
  EXPECT_EQ(p.total(), b.elements);
  EXPECT_EQ(p.tensors, b.tensors);
}

INSTANTIATE_TEST_SUITE_P(Presets, ParameterCountTest,
                         ::testing::Combine(::testing::Values("tiny", "llama-tiny", "moe-tiny"),
                                            ::testing::Values(1, 2)));

TEST(MemoryModel, StagesSplitTheParametersAndTheLastHoldsTheTiedHead) {
  const Workload w = workload("tiny");
  const MemoryModel m(w);
  const int64_t whole = m.parameters(Layout{}, 0).total();
  const Layout pp{.pp = 2};
  const int64_t vp = 256;  // vocab 256 padded to 128
  EXPECT_EQ(m.parameters(pp, 0).total() + m.parameters(pp, 1).total(), whole + vp * 128);
  EXPECT_EQ(stage_layers(126, 16),
            (std::vector<int64_t>{7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7}));
  EXPECT_EQ(stage_layers(10, 4), (std::vector<int64_t>{2, 3, 3, 2}));
  EXPECT_EQ(stage_layers(9, 4), (std::vector<int64_t>{3, 2, 2, 2}));
}

TEST(MemoryModel, GtpShardsTheWeightsAndExpertParallelismTheExperts) {
  const MemoryModel m(workload("moe-tiny"));
  const ParameterCount one = m.parameters(Layout{}, 0);
  const ParameterCount gtp = m.parameters(Layout{.gtp = 2}, 0);
  EXPECT_EQ(gtp.replicated, one.replicated);
  EXPECT_LT(gtp.sharded, one.sharded * 6 / 10);
  const ParameterCount ep = m.parameters(Layout{.ep = 2}, 0);
  EXPECT_LT(ep.total(), one.total());
  EXPECT_EQ(ep.replicated, one.replicated);
}

TEST(MemoryModel, InFlightMicroBatchesPerSchedule) {
  Layout l{.pp = 4, .grad_accum = 8};
  l.schedule = PipelineSchedule::gpipe;
  EXPECT_EQ(micro_batches_in_flight(l, 0), 8);
  EXPECT_EQ(micro_batches_in_flight(l, 3), 8);
  l.schedule = PipelineSchedule::one_f_one_b;
  EXPECT_EQ(micro_batches_in_flight(l, 0), 4);
  EXPECT_EQ(micro_batches_in_flight(l, 3), 1);
  l.schedule = PipelineSchedule::zero_bubble;
  EXPECT_EQ(micro_batches_in_flight(l, 1), 3);
  // Interleaved, V = 2: stage 0 warms up (4-1)·2 + (2-1)·4 + 1 = 11 chunks of
  // half a stage: 5.5 stages' worth, P·(1 + (P-1)/(P·V)) = 4 · 1.375.
  l.schedule = PipelineSchedule::interleaved;
  l.vpp = 2;
  EXPECT_DOUBLE_EQ(micro_batches_in_flight(l, 0), 5.5);
  EXPECT_DOUBLE_EQ(micro_batches_in_flight(l, 3), 2.5);
  // Fewer micro-batches than the warm-up: all of them.
  l.grad_accum = 2;
  EXPECT_DOUBLE_EQ(micro_batches_in_flight(l, 0), 2);
  EXPECT_EQ(micro_batches_in_flight(Layout{.grad_accum = 8}, 0), 1);
}

TEST(MemoryModel, RecomputationKeepsLessThanNone) {
  const MemoryModel m(workload("tiny", 1024));
  const Layout l{.micro_batch = 8};
  const int64_t none = m.layer_activations(l, false, Recompute::none);
  const int64_t selective = m.layer_activations(l, false, Recompute::selective);
  const int64_t full = m.layer_activations(l, false, Recompute::full);
  EXPECT_LT(selective, none);
  // At 128 positions the CPU's attention keeps its probabilities, which
  // selective recomputation drops: (B, H, T, T) f32.
  const MemoryModel short_seq(workload("tiny", 128));
  EXPECT_EQ(short_seq.layer_activations(l, false, Recompute::none) -
                short_seq.layer_activations(l, false, Recompute::selective),
            int64_t{8} * 4 * 128 * 128 * 4 + 8 * 128 * 4 * 4);
  // Full recomputation keeps the layer's input: tokens x width x 4 bytes.
  EXPECT_EQ(full, 8 * 1024 * 128 * 4);
  Layout f = l;
  f.recompute = Recompute::full;
  Layout s = l;
  s.recompute = Recompute::selective;
  Workload eight = workload("tiny", 1024);
  eight.model.layers = 8;
  const MemoryModel m8(eight);
  const int64_t act_none = m8.rank(l, 0).activations;
  EXPECT_LT(m8.rank(f, 0).activations, act_none * 35 / 100);
  EXPECT_LT(m8.rank(s, 0).activations, act_none);
  // --recompute-layers K recomputes K of the stage's layers.
  f.recompute_layers = 4;
  EXPECT_GT(m8.rank(f, 0).activations,
            m8.rank(Layout{.micro_batch = 8, .recompute = Recompute::full}, 0).activations);
}

TEST(MemoryModel, ShortSequencesKeepAttentionProbabilitiesOnTheCpuOnly) {
  Workload w = workload("tiny", 128);
  const Layout l{.micro_batch = 4};
  const int64_t cpu = MemoryModel(w).layer_activations(l, false, Recompute::none);
  w.gpu = true;
  const int64_t gpu = MemoryModel(w).layer_activations(l, false, Recompute::none);
  EXPECT_EQ(cpu - gpu, int64_t{4} * 4 * 128 * 128 * 4);
}

TEST(MemoryModel, DistributedOptimizerShardsTheMomentsOverDpTimesCp) {
  const MemoryModel m(workload("llama-tiny"));
  const Layout plain{.dp = 4};
  Layout dopt = plain;
  dopt.distributed_optimizer = true;
  EXPECT_EQ(m.rank(dopt, 0).optimizer, (m.rank(plain, 0).optimizer + 3) / 4);
  dopt.cp = 2;
  EXPECT_EQ(m.rank(dopt, 0).optimizer, (m.rank(plain, 0).optimizer + 7) / 8);
  EXPECT_EQ(m.rank(dopt, 0).parameters, m.rank(plain, 0).parameters);
}

TEST(MemoryModel, SequenceAndContextParallelismShardTheActivations) {
  const MemoryModel m(workload("llama-tiny", 512));
  const Layout tp{.tp = 2, .micro_batch = 4};
  Layout sp = tp;
  sp.sp = parallel::SequenceParallel::seq;
  const int64_t a_tp = m.layer_activations(tp, false, Recompute::none);
  const int64_t a_sp = m.layer_activations(sp, false, Recompute::none);
  // The four residual-stream tensors and two norms' statistics are split.
  EXPECT_EQ(a_tp - a_sp, (4 * 4 * 512 * 128 * 4 + 2 * 4 * 512 * 4) / 2);
  Layout cp = tp;
  cp.cp = 2;
  EXPECT_EQ(m.layer_activations(cp, false, Recompute::none) * 2, a_tp);
  EXPECT_GT(m.rank(cp, 0).comm_buffers, 0);
}

TEST(MemoryModel, ParsesMemorySizes) {
  EXPECT_EQ(parse_memory_size("40GiB", "--memory-limit"), int64_t{40} << 30);
  EXPECT_EQ(parse_memory_size("40G", "--memory-limit"), int64_t{40} << 30);
  EXPECT_EQ(parse_memory_size("1.5GiB", "--memory-limit"), int64_t{3} << 29);
  EXPECT_EQ(parse_memory_size("80GB", "--memory-limit"), int64_t{80'000'000'000});
  EXPECT_EQ(parse_memory_size("512mib", "--memory-limit"), int64_t{512} << 20);
  EXPECT_EQ(parse_memory_size("1000", "--memory-limit"), 1000);
  for (const char* bad : {"", "GiB", "-1GiB", "4 GiB", "4XB", "0"}) {
    EXPECT_THROW(parse_memory_size(bad, "--memory-limit"), Error) << bad;
  }
  EXPECT_EQ(format_bytes(int64_t{3} << 29), "1.5 GiB");
}

}  // namespace
}  // namespace weft::plan
