// Generalized tensor parallelism's parts on the local backend: the row split
// and its padding, the weight cache's tickets, the prefetch chain's order of
// all-gathers (the next layer's gather is in flight while a layer computes)
// and its deferred reduce-scatters (awaited before anyone reads a gradient).
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "testing.h"
#include "weft/comm/local.h"
#include "weft/core/memory.h"
#include "weft/kernels/activation.h"
#include "weft/parallel/gtp/runtime.h"
#include "weft/parallel/gtp/sharded_weight_source.h"
#include "weft/parallel/gtp/source_batch.h"
#include "weft/parallel/mappings.h"

namespace weft::parallel::gtp {
namespace {

using weft::testing::close;
using weft::testing::kF32;
using weft::testing::random_tensor;

// A whole (unsplit) weight as a module builds it.
Parameter whole_weight(const std::string& name, const Tensor& value) {
  return make_parameter(name, value, split_spec(value.shape(), 0, "tp", 0, 1), true);
}

TEST(GtpRows, PaddedAtTheTailToAlignmentTimesN) {
  struct Case {
    int64_t rows;
    int n;
    int64_t shard;
  };
  // 257 rows over 2: padded to 288 (a multiple of 16 · 2), 144 each; 10 rows
  // over 4: padded to 64, rank 0 holds all 10 and ranks 1-3 only padding.
  for (const Case c : {Case{257, 2, 144}, Case{257, 4, 80}, Case{10, 4, 16}, Case{64, 2, 32}}) {
    SCOPED_TRACE(::testing::Message() << c.rows << " rows over " << c.n);
    const Tensor full = random_tensor({c.rows, 3}, 1);
    ShardSpec base = split_spec(full.shape(), 0, "tp", 0, 1);
    std::vector<float> joined;
    int64_t covered = 0;
    for (int r = 0; r < c.n; ++r) {
      const ShardSpec s = row_split_spec(base, "gtp", r, c.n, 16);
      EXPECT_EQ(s.row_length + s.row_padding, c.shard);
      EXPECT_EQ(c.shard % 16, 0);
      EXPECT_EQ(s.row_offset, r * c.shard);
      EXPECT_EQ(s.replicated_over, (std::vector<std::string>{"cp", "ep", "dp"}));
      const Tensor local = shard_of(s, full);
      ASSERT_EQ(local.size(0), c.shard);
      // The padding is zero, and the rows with data are the weight's.
      const std::vector<float> pad = local.narrow(s.row_length, s.row_padding).to_vector();
      EXPECT_EQ(pad, std::vector<float>(pad.size(), 0.0f));
      const std::vector<float> mine = unpadded(s, local).to_vector();
      joined.insert(joined.end(), mine.begin(), mine.end());
      covered += s.row_length;
    }
    EXPECT_EQ(covered, c.rows);
    EXPECT_EQ(joined, full.to_vector());
  }
}

TEST(GtpRows, OnTopOfTheTpSlice) {
  // A fused QKV weight (3 blocks) at TP rank 1 of 2: its 3·4 rows split again.
  const Tensor full = random_tensor({24, 5}, 2);
  const ShardSpec tp = split_spec(full.shape(), 0, "tp", 1, 2, 3);
  const ShardSpec s = row_split_spec(tp, "gtp", 1, 2, 4);
  EXPECT_EQ(s.tp_rows(), 12);
  EXPECT_EQ(s.row_offset, 8);
  EXPECT_EQ(s.row_length, 4);
  EXPECT_EQ(s.row_padding, 4);
  EXPECT_EQ(unpadded(s, shard_of(s, full)).to_vector(),
            shard_of(tp, full).narrow(8, 4).to_vector());
  EXPECT_EQ(s.tp_level().row_group, "");
}

TEST(WeightCache, TicketsSharePooledBuffersNeverHeldOnes) {
  MemoryTracker tracker;
  ScopedMemoryTracker scope(tracker);
  WeightCache cache(2, ExecContext::host());
  const auto a = cache.reserve({4, 8}, DType::f32, Use::forward);
  const auto b = cache.reserve({4, 8}, DType::f32, Use::forward);
  const auto c = cache.reserve({4, 8}, DType::f32, Use::forward);
  const auto bwd = cache.reserve({4, 8}, DType::f32, Use::backward);
  EXPECT_EQ(cache.buffers(), 0);  // a ticket is no buffer
  Tensor ta = cache.get(a), tb = cache.get(b);
  EXPECT_FALSE(ta.same_storage(tb));
  EXPECT_TRUE(cache.get(a).same_storage(ta));  // the ticket keeps its buffer
  // A third gathered weight would exceed the two the cache keeps alive.
  EXPECT_THROW(cache.get(c), Error);
  EXPECT_THROW(cache.get(bwd), Error);
  cache.release(a);
  EXPECT_FALSE(cache.held(a));
  EXPECT_TRUE(cache.get(c).same_storage(ta));  // a released buffer of the key is reused
  cache.release(c);
  Tensor tbwd = cache.get(bwd);  // another use: a buffer of its own
  EXPECT_FALSE(tbwd.same_storage(ta));
  EXPECT_EQ(cache.buffers(), 3);
  EXPECT_EQ(cache.bytes(), 3 * 4 * 8 * 4);
  EXPECT_EQ(tracker.tag(Device::cpu(), MemoryTag::weight_cache).live, cache.bytes());
  EXPECT_EQ(cache.peak_live_weights(), 2);
  // Gradient buffers do not count as gathered weights.
  const auto g = cache.reserve({4, 8}, DType::f32, Use::gradient);
  cache.get(g);
  EXPECT_EQ(cache.live_weights(), 2);
}

// Layers of a toy model: weights of different shapes, the first unaligned.
constexpr int kLayers = 3;
const Shape kShapes[kLayers] = {{20, 8}, {16, 8}, {24, 8}};

struct Model {
  std::shared_ptr<ParallelContext> context;
  std::vector<std::unique_ptr<ShardedWeightSource>> sources;
};

Model make_model(std::shared_ptr<comm::ProcessGroup> gtp_group, Options options = {}) {
  Model m;
  m.context = std::make_shared<ParallelContext>();
  enable(*m.context, gtp_group, std::move(options));
  for (int i = 0; i < kLayers; ++i) {
    const Parameter w =
        whole_weight("w" + std::to_string(i) + ".weight", random_tensor(kShapes[i], 10 + i));
    m.sources.push_back(std::make_unique<ShardedWeightSource>(
        w, gtp_group, m.context->gtp_runtime, m.context->precision, m.context->exec));
  }
  return m;
}

// Each rank's weight gradient of layer i in a pass: distinct per rank.
Tensor rank_gradient(int layer, int rank) {
  return random_tensor(kShapes[layer], 100 * layer + rank);
}

// One pass: forward over the layers, backward in reverse, each wgrad the
// rank's. `log` receives the test's own marks between the calls.
void run_pass(Model& m, int rank, const std::function<void(const std::string&)>& mark,
              std::vector<const void*>* buffers = nullptr) {
  PassContext pass;
  for (int i = 0; i < kLayers; ++i) {
    const Tensor w = m.sources[i]->weight_for_forward(pass);
    if (buffers) buffers->push_back(w.raw());
    mark("forward " + std::to_string(i));
  }
  for (int i = kLayers - 1; i >= 0; --i) {
    const Tensor w = m.sources[i]->weight_for_backward(pass);
    if (buffers) buffers->push_back(w.raw());
    mark("backward " + std::to_string(i));
    Tensor g = m.sources[i]->weight_grad(pass);
    g.copy_from(rank_gradient(i, rank));
    m.sources[i]->finalize_weight_grad(pass, g);
    mark("finalized " + std::to_string(i));
  }
}

TEST(GtpChain, GathersTheWholeWeightAndReducesTheGradientIntoTheShard) {
  for (int n : {2, 4}) {
    comm::run_local(n, [&](comm::ProcessGroup& world) {
      std::vector<int> ranks;
      for (int r = 0; r < n; ++r) ranks.push_back(r);
      auto group = world.new_subgroups_by_enumeration({ranks}, "gtp");
      Model m = make_model(group);
      for (int pass = 0; pass < 3; ++pass) {
        PassContext ctx;
        for (int i = 0; i < kLayers; ++i) {
          const Tensor w = m.sources[i]->weight_for_forward(ctx);
          EXPECT_EQ(w.shape(), kShapes[i]);
          EXPECT_EQ(w.to_vector(), random_tensor(kShapes[i], 10 + i).to_vector());
        }
        for (int i = kLayers - 1; i >= 0; --i) {
          EXPECT_EQ(m.sources[i]->weight_for_backward(ctx).to_vector(),
                    random_tensor(kShapes[i], 10 + i).to_vector());
          Tensor g = m.sources[i]->weight_grad(ctx);
          EXPECT_EQ(g.to_vector(), std::vector<float>(g.numel(), 0.0f));
          g.copy_from(rank_gradient(i, world.rank()));
          m.sources[i]->finalize_weight_grad(ctx, g);
        }
        // No drain: the end of backward completed every reduction.
        for (int i = 0; i < kLayers; ++i) {
          SCOPED_TRACE(::testing::Message() << "pass " << pass << " layer " << i);
          Tensor mean = Tensor::zeros(kShapes[i]);
          for (int r = 0; r < n; ++r)
            kernels::axpy(ExecContext::host(), 1.0f / n, rank_gradient(i, r), mean);
          const Parameter& p = m.sources[i]->parameter();
          Tensor expect = shard_of(p.spec, mean);
          kernels::scale(ExecContext::host(), expect, static_cast<float>(pass + 1));
          EXPECT_TRUE(close(expect, p.grad, kF32, 1.0));
          // The padding's gradient stays zero.
          const std::vector<float> pad =
              p.grad.narrow(p.spec.row_length, p.spec.row_padding).to_vector();
          EXPECT_EQ(pad, std::vector<float>(pad.size(), 0.0f));
        }
      }
      EXPECT_TRUE(m.context->gtp_runtime->chain.recorded());
      EXPECT_LE(m.context->gtp_runtime->cache.peak_live_weights(), 2);
    });
  }
}

// Neighbours on the chain never share a buffer, at most two gathered
// weights are alive, and after the first steps no pass allocates.
TEST(GtpChain, NeighboursNeverShareABufferAndSteadyStateAllocatesNothing) {
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    auto group = world.new_subgroups_by_enumeration({{0, 1}}, "gtp");
    Model m = make_model(group);
    WeightCache& cache = m.context->gtp_runtime->cache;
    const auto nothing = [](const std::string&) {};
    run_pass(m, world.rank(), nothing);  // records the chain
    run_pass(m, world.rank(), nothing);  // prefetches along it
    const int64_t buffers = cache.buffers();
    for (int pass = 0; pass < 3; ++pass) {
      std::vector<const void*> used;
      run_pass(m, world.rank(), nothing, &used);
      ASSERT_EQ(used.size(), 2u * kLayers);
      for (size_t i = 1; i < used.size(); ++i) EXPECT_NE(used[i], used[i - 1]) << "event " << i;
    }
    EXPECT_EQ(cache.buffers(), buffers);
    EXPECT_EQ(cache.peak_live_weights(), 2);
    EXPECT_EQ(cache.live_weights(), 0);  // the end of backward released them
  });
}

// The event order on rank 0 in a pass after the recording one: each
// layer's all-gather is issued before the previous layer computes, and each
// layer's reduce-scatter is waited for only in the next layer's backward —
// all of them before the pass returns.
TEST(GtpChain, NextGatherInFlightWhileALayerComputesAndReductionsDeferred) {
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    auto group = world.new_subgroups_by_enumeration({{0, 1}}, "gtp");
    Model m = make_model(group);
    std::mutex mu;
    std::vector<std::string> log;
    const auto mark = [&](const std::string& s) {
      std::lock_guard lock(mu);
      log.push_back(s);
    };
    run_pass(m, world.rank(), [](const std::string&) {});
    if (world.rank() == 0) {
      group->set_observer([&](const comm::CommEvent& e) {
        if (e.kind == comm::CommEvent::Kind::completed) return;  // the worker's
        mark(std::string(comm_event_kind_name(e.kind)) + " " + std::string(op_kind_name(e.op)));
      });
    }
    run_pass(m, world.rank(), mark);
    mark("optimizer");
    group->set_observer(nullptr);
    if (world.rank() != 0) return;
    const std::vector<std::string> expected{
        // forward: the head's gather, the next one's, then the head is waited for
        "issued all_gather", "issued all_gather", "wait_begin all_gather", "wait_end all_gather",
        "forward 0", "issued all_gather", "wait_begin all_gather", "wait_end all_gather",
        "forward 1",
        // the last forward weight prefetches the first backward one
        "issued all_gather", "wait_begin all_gather", "wait_end all_gather", "forward 2",
        "issued all_gather", "wait_begin all_gather", "wait_end all_gather", "backward 2",
        "issued reduce_scatter", "finalized 2", "issued all_gather", "wait_begin all_gather",
        "wait_end all_gather", "backward 1",
        // layer 1's backward waits for layer 2's reduction, then issues its own
        "wait_begin reduce_scatter", "wait_end reduce_scatter", "issued reduce_scatter",
        "finalized 1", "wait_begin all_gather", "wait_end all_gather", "backward 0",
        // the end of backward: the last two reductions are completed
        "wait_begin reduce_scatter", "wait_end reduce_scatter", "issued reduce_scatter",
        "wait_begin reduce_scatter", "wait_end reduce_scatter", "finalized 0", "optimizer"};
    EXPECT_EQ(log, expected);
  });
}

// With the cache limited to one gathered weight nothing is prefetched.
TEST(GtpChain, OneCachedWeightMeansNoPrefetch) {
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    auto group = world.new_subgroups_by_enumeration({{0, 1}}, "gtp");
    Model m = make_model(group, {.cache_weights = 1});
    for (int pass = 0; pass < 3; ++pass) run_pass(m, world.rank(), [](const std::string&) {});
    EXPECT_EQ(m.context->gtp_runtime->chain.stats().prefetched, 0);
    EXPECT_EQ(m.context->gtp_runtime->cache.peak_live_weights(), 1);
  });
}

// Full-gradient accumulation reduces once, in the final microbatch; both
// modes end with the same shard gradient.
TEST(GtpChain, GradientAccumulationModesAgree) {
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    auto group = world.new_subgroups_by_enumeration({{0, 1}}, "gtp");
    std::vector<std::vector<float>> grads[2];
    for (GradAccumulation mode : {GradAccumulation::shard, GradAccumulation::full}) {
      Model m = make_model(group, {.grad_accumulation = mode});
      for (int step = 0; step < 2; ++step) {
        for (int micro = 0; micro < 3; ++micro) {
          PassContext pass;
          pass.set_final_microbatch(micro == 2);
          for (int i = 0; i < kLayers; ++i) m.sources[i]->weight_for_forward(pass);
          for (int i = kLayers - 1; i >= 0; --i) {
            m.sources[i]->weight_for_backward(pass);
            Tensor g = m.sources[i]->weight_grad(pass);
            kernels::axpy(ExecContext::host(), 1.0f, rank_gradient(i, world.rank() + micro), g);
            m.sources[i]->finalize_weight_grad(pass, g);
          }
        }
      }
      m.context->gtp_runtime->chain.drain();
      for (auto& s : m.sources)
        grads[static_cast<int>(mode)].push_back(s->parameter().grad.to_vector());
    }
    for (int i = 0; i < kLayers; ++i) {
      EXPECT_TRUE(close(Tensor::from({static_cast<int64_t>(grads[0][i].size())}, grads[0][i]),
                        Tensor::from({static_cast<int64_t>(grads[1][i].size())}, grads[1][i]), kF32,
                        1.0));
    }
  });
}

// A shard's gradient is reported final once, after its last reduction of
// the pass: the data-parallel sync may read it from then on.
TEST(GtpChain, ReportsEachGradientFinalOncePerPass) {
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    auto group = world.new_subgroups_by_enumeration({{0, 1}}, "gtp");
    Model m = make_model(group);
    std::vector<std::string> reported;
    m.context->gtp_runtime->chain.set_on_gradient_final(
        [&](Parameter& p) { reported.push_back(p.name); });
    const auto mark = [&](const std::string& s) {
      if (s.starts_with("finalized")) reported.push_back(s);
    };
    run_pass(m, world.rank(), mark);  // recording: reported at the drain
    EXPECT_EQ(reported, (std::vector<std::string>{"finalized 2", "finalized 1", "finalized 0"}));
    m.context->gtp_runtime->chain.drain();
    EXPECT_EQ(reported.size(), 6u);
    reported.clear();
    run_pass(m, world.rank(), mark);
    EXPECT_EQ(reported, (std::vector<std::string>{"finalized 2", "w2.weight", "finalized 1",
                                                  "w1.weight", "w0.weight", "finalized 0"}));
  });
}

// A batch of sources (a GroupedLinear's experts) between two single
// weights on the chain: layer 1 is kExperts weights of one shape, gathered by
// one all_gather_coalesced per use and reduced by one
// reduce_scatter_coalesced per pass, or (unbatched) one source each.
constexpr int kExperts = 3;
const Shape kExpertShape{20, 8};  // unaligned: padded to 32 rows over 2 ranks

struct BatchModel {
  std::shared_ptr<ParallelContext> context;
  std::vector<std::unique_ptr<ShardedWeightSource>> sources;  // w0, experts, w2
  std::unique_ptr<SourceBatch> batch;                         // over the experts, or null
  ShardedWeightSource& expert(int e) { return *sources[static_cast<size_t>(1 + e)]; }
};

Tensor expert_value(int e) { return random_tensor(kExpertShape, 50 + e); }
Tensor expert_gradient(int e, int rank, int micro) {
  return random_tensor(kExpertShape, 500 + 10 * e + rank + 100 * micro);
}

BatchModel make_batch_model(std::shared_ptr<comm::ProcessGroup> group, bool batched,
                            Options options = {}) {
  BatchModel m;
  m.context = std::make_shared<ParallelContext>();
  enable(*m.context, group, std::move(options));
  const auto add = [&](const std::string& name, const Tensor& value) {
    m.sources.push_back(std::make_unique<ShardedWeightSource>(
        whole_weight(name, value), group, m.context->gtp_runtime, m.context->precision,
        m.context->exec));
  };
  add("w0.weight", random_tensor(kShapes[0], 10));
  for (int e = 0; e < kExperts; ++e) add(format("x.experts.{}.weight", e), expert_value(e));
  add("w2.weight", random_tensor(kShapes[2], 12));
  if (batched) {
    std::vector<ShardedWeightSource*> experts;
    for (int e = 0; e < kExperts; ++e) experts.push_back(&m.expert(e));
    m.batch = std::make_unique<SourceBatch>(experts, m.context->gtp_runtime);
  }
  return m;
}

// One pass over w0, the experts, w2 and back; every weight checked, every
// gradient the rank's (micro: the microbatch).
void run_batch_pass(BatchModel& m, int rank, PassContext& pass, int micro = 0) {
  // Layer i of kShapes (0 or 2): the first source or the last.
  const auto single = [&](int i, bool backward) {
    ShardedWeightSource& s = i == 0 ? *m.sources.front() : *m.sources.back();
    const Tensor w = backward ? s.weight_for_backward(pass) : s.weight_for_forward(pass);
    EXPECT_EQ(w.to_vector(), random_tensor(kShapes[i], 10 + i).to_vector());
    if (!backward) return;
    Tensor g = s.weight_grad(pass);
    kernels::axpy(ExecContext::host(), 1.0f, rank_gradient(i, rank), g);
    s.finalize_weight_grad(pass, g);
  };
  const auto experts = [&](bool backward) {
    std::vector<Tensor> ws, gs;
    if (m.batch) {
      ws = backward ? m.batch->weights_for_backward(pass) : m.batch->weights_for_forward(pass);
      if (backward) gs = m.batch->weight_grads(pass);
    }
    for (int e = 0; e < kExperts; ++e) {
      ShardedWeightSource& s = m.expert(e);
      const Tensor w = m.batch    ? ws[static_cast<size_t>(e)]
                       : backward ? s.weight_for_backward(pass)
                                  : s.weight_for_forward(pass);
      EXPECT_EQ(w.to_vector(), expert_value(e).to_vector()) << "expert " << e;
      if (!backward) continue;
      Tensor g = m.batch ? gs[static_cast<size_t>(e)] : s.weight_grad(pass);
      EXPECT_EQ(g.shape(), kExpertShape);
      kernels::axpy(ExecContext::host(), 1.0f, expert_gradient(e, rank, micro), g);
      if (!m.batch) s.finalize_weight_grad(pass, g);
    }
    if (m.batch && backward) m.batch->finalize_weight_grads(pass);
  };
  single(0, false);
  experts(false);
  single(2, false);
  single(2, true);
  experts(true);
  single(0, true);
}

// The experts' shard gradients after the passes (drained).
std::vector<std::vector<float>> expert_grads(BatchModel& m) {
  m.context->gtp_runtime->chain.drain();
  std::vector<std::vector<float>> out;
  for (int e = 0; e < kExperts; ++e) out.push_back(m.expert(e).parameter().grad.to_vector());
  return out;
}

TEST(GtpBatch, OneAllGatherPerUseAndOneReduceScatterPerPass) {
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    auto group = world.new_subgroups_by_enumeration({{0, 1}}, "gtp");
    std::vector<std::vector<float>> grads[2];
    for (const bool batched : {false, true}) {
      SCOPED_TRACE(batched ? "batched" : "one source at a time");
      BatchModel m = make_batch_model(group, batched);
      for (int pass = 0; pass < 4; ++pass) {
        const comm::CommStats before = group->stats();
        const PrefetchChain::Stats chain_before = m.context->gtp_runtime->chain.stats();
        PassContext ctx;
        run_batch_pass(m, world.rank(), ctx);
        const comm::CommStats after = group->stats();
        const int64_t expert_collectives = batched ? 1 : kExperts;
        // Forward and backward: w0, w2 and the experts' gathers.
        EXPECT_EQ(after.count(comm::OpKind::all_gather) - before.count(comm::OpKind::all_gather),
                  2 * (2 + expert_collectives));
        EXPECT_EQ(
            after.count(comm::OpKind::reduce_scatter) - before.count(comm::OpKind::reduce_scatter),
            2 + expert_collectives);
        const PrefetchChain::Stats& chain = m.context->gtp_runtime->chain.stats();
        EXPECT_EQ(chain.gathers - chain_before.gathers, 2 * (2 + expert_collectives));
        EXPECT_EQ(chain.reductions - chain_before.reductions, 2 + expert_collectives);
      }
      // After the recording pass the batch was prefetched along the chain
      // like any weight, and the cache held at most two members at once.
      EXPECT_TRUE(m.context->gtp_runtime->chain.recorded());
      EXPECT_GT(m.context->gtp_runtime->chain.stats().prefetched, 0);
      EXPECT_EQ(m.context->gtp_runtime->cache.peak_live_weights(), 2);
      EXPECT_EQ(m.context->gtp_runtime->cache.live_weights(), 0);
      grads[batched ? 1 : 0] = expert_grads(m);
      // Each shard's gradient: the mean over the ranks, four passes of it.
      for (int e = 0; e < kExperts; ++e) {
        Tensor mean = Tensor::zeros(kExpertShape);
        for (int r = 0; r < 2; ++r)
          kernels::axpy(ExecContext::host(), 0.5f, expert_gradient(e, r, 0), mean);
        kernels::scale(ExecContext::host(), mean, 4.0f);
        const Parameter& p = m.expert(e).parameter();
        EXPECT_TRUE(close(shard_of(p.spec, mean), p.grad, kF32, 1.0)) << "expert " << e;
      }
    }
    // Batched reductions are the single ones, bit for bit.
    EXPECT_EQ(grads[1], grads[0]);
  });
}

// Steady-state batched passes allocate nothing, and under full-gradient
// accumulation the batch reduces once a step, equal to one source at a time.
TEST(GtpBatch, SteadyStateAllocatesNothingAndFullAccumulationAgrees) {
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    auto group = world.new_subgroups_by_enumeration({{0, 1}}, "gtp");
    {
      BatchModel m = make_batch_model(group, true);
      for (int pass = 0; pass < 2; ++pass) {
        PassContext ctx;
        run_batch_pass(m, world.rank(), ctx);
      }
      const int64_t buffers = m.context->gtp_runtime->cache.buffers();
      PassContext ctx;
      run_batch_pass(m, world.rank(), ctx);
      EXPECT_EQ(m.context->gtp_runtime->cache.buffers(), buffers);
    }
    std::vector<std::vector<float>> grads[2];
    for (const bool batched : {false, true}) {
      BatchModel m =
          make_batch_model(group, batched, {.grad_accumulation = GradAccumulation::full});
      for (int step = 0; step < 2; ++step) {
        const comm::CommStats before = group->stats();
        for (int micro = 0; micro < 3; ++micro) {
          PassContext ctx;
          ctx.set_final_microbatch(micro == 2);
          run_batch_pass(m, world.rank(), ctx, micro);
        }
        const comm::CommStats after = group->stats();
        EXPECT_EQ(
            after.count(comm::OpKind::reduce_scatter) - before.count(comm::OpKind::reduce_scatter),
            2 + (batched ? 1 : kExperts));
      }
      grads[batched ? 1 : 0] = expert_grads(m);
    }
    EXPECT_EQ(grads[1], grads[0]);
  });
}

}  // namespace
}  // namespace weft::parallel::gtp
