// The quantized GTP gather. QuantizedShard: every rank quantizes its
// (zero-padded) shard and gathers data and scales in one packed buffer; the
// gathered bytes are bit for bit the whole weight quantized and decode to
// the same GEMM operand, for each recipe, at gtp 2 and 4, with rows that are
// not a multiple of the block rows times N. ShardedWeightSource under a
// quantized recipe: the gathers run along the prefetch chain (the next
// weight's gather issued before this one's GEMMs), each shard is quantized
// once per step and direction (again when the optimizer writes it or, under
// delayed scaling, when end_step moved its scale), and steady-state passes
// allocate nothing. A SourceBatch moves several such weights in one gather.
#include "weft/parallel/gtp/quantized_gather.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "testing.h"
#include "weft/comm/local.h"
#include "weft/core/memory.h"
#include "weft/kernels/activation.h"
#include "weft/parallel/context.h"
#include "weft/parallel/gtp/runtime.h"
#include "weft/parallel/gtp/sharded_weight_source.h"
#include "weft/parallel/gtp/source_batch.h"

namespace weft::parallel::gtp {
namespace {

// Bytes [offset, offset + n) of a and b agree.
bool same_bytes(const Tensor& a, int64_t a_offset, const Tensor& b, int64_t b_offset, int64_t n) {
  return std::memcmp(static_cast<const uint8_t*>(a.raw()) + a_offset,
                     static_cast<const uint8_t*>(b.raw()) + b_offset, static_cast<size_t>(n)) == 0;
}

// Rank r's part (S rows of the padded weight) holds the rows of `whole`
// (the whole weight quantized) that fall in it: row-wise data and scales
// row by row, column-wise ones column by column.
void expect_part_of(const QuantizedTensor& part, const QuantizedTensor& whole, int64_t r) {
  const int64_t s = part.rows, start = r * s;
  const int64_t len = std::min(s, whole.rows - start);
  if (whole.has_rowwise()) {
    const int64_t row = whole.data.nbytes() / whole.rows;
    EXPECT_TRUE(same_bytes(part.data, 0, whole.data, start * row, len * row));
    if (whole.mode == ScalingMode::tensor) return;
    const int64_t br = scaling_block_rows(whole.mode);
    const int64_t srow = whole.scale_inv.nbytes() / whole.scale_inv.size(0);
    const int64_t blocks = (len + br - 1) / br;
    EXPECT_TRUE(same_bytes(part.scale_inv, 0, whole.scale_inv, start / br * srow, blocks * srow));
    return;
  }
  ASSERT_TRUE(part.has_columnwise());
  const int64_t bc = scaling_block_cols(whole.mode);
  const int64_t whole_scales = whole.col_scale_inv.size(1),
                part_scales = part.col_scale_inv.size(1);
  for (int64_t c = 0; c < whole.cols; ++c) {
    EXPECT_TRUE(same_bytes(part.col_data, c * s, whole.col_data, c * whole.rows + start, len));
    EXPECT_TRUE(same_bytes(part.col_scale_inv, c * part_scales, whole.col_scale_inv,
                           c * whole_scales + start / bc, (len + bc - 1) / bc));
  }
}

TEST(QuantizedGtpGather, EqualsQuantizeAfterGather) {
  const int64_t rows = 50, cols = 96;
  const Tensor w = weft::testing::random_tensor({rows, cols}, 11);
  const std::vector<float> wv = w.to_vector();
  for (Recipe r : kQuantizedRecipes) {
    for (bool col : {false, true}) {
      // The reference: the whole weight quantized (a high-precision gather).
      auto ref_pc = make_context(nullptr, SequenceParallel::off, Precision::of(r), 5);
      GemmQuantizer ref_q(*ref_pc, "w", nullptr);
      const PassContext ref_pass;
      const QuantizedTensor ref = ref_q.quantized(GemmQuantizer::Operand::weight, w, col, ref_pass);
      const std::vector<float> ref_operand = ref_q.operand_of(ref, col).to_vector();
      for (int n : {2, 4}) {
        SCOPED_TRACE(std::string(recipe_name(r)) + " gtp " + std::to_string(n) +
                     (col ? " column-wise" : " row-wise"));
        const int64_t align = std::max<int64_t>(16, quantized_row_alignment(r));
        const int64_t s = (rows + align * n - 1) / (align * n) * align;
        comm::run_local(n, [&](comm::ProcessGroup& world) {
          std::vector<float> sv(static_cast<size_t>(s * cols), 0.0f);
          const int64_t start = world.rank() * s;
          for (int64_t i = 0; i < s && start + i < rows; ++i) {
            std::copy_n(wv.begin() + (start + i) * cols, cols, sv.begin() + i * cols);
          }
          auto pc = make_context(nullptr, SequenceParallel::off, Precision::of(r), 5);
          GemmQuantizer q(*pc, "w", nullptr);
          const PassContext pass;
          QuantizedShard shard;
          EXPECT_TRUE(shard.update(q, world, Tensor::from({s, cols}, sv), 0, col, pass));
          Tensor gathered = Tensor::empty({shard.packed().nbytes() * n}, DType::u8);
          world.all_gather(gathered, shard.packed()).wait();
          for (int64_t k = 0; k * s < rows; ++k) {
            SCOPED_TRACE("shard " + std::to_string(k));
            const QuantizedTensor part = shard.part(gathered, k);
            EXPECT_EQ(part.tensor_scale_inv, ref.tensor_scale_inv);
            expect_part_of(part, ref, k);
          }
          // And the operand the GEMM multiplies.
          Tensor operand = Tensor::empty({n * s, cols});
          shard.dequantize(ExecContext::host(), gathered, rows, operand);
          EXPECT_EQ(operand.narrow(0, rows).to_vector(), ref_operand);
          // Bytes moved per element: fp8 1 (+ the scale), MXFP8 1 + 1/32,
          // NVFP4 16x16 0.5 + 1/256 (+ the per-tensor scale), fp8-block 1 +
          // 4 / (128 · 128); bf16 would be 2.
          const double per =
              static_cast<double>(shard.bytes_moved()) / static_cast<double>(shard.elements());
          const double expected = r == Recipe::mxfp8   ? 1.0 + 1.0 / 32
                                  : r == Recipe::nvfp4 ? 0.5 + 1.0 / 256
                                                       : 1.0;
          EXPECT_NEAR(per, expected, 4.0 / static_cast<double>(s * cols) + 1e-12);
          // The same version and key in the same pass: nothing to quantize.
          EXPECT_FALSE(shard.update(q, world, Tensor::from({s, cols}, sv), 0, col, pass));
          EXPECT_EQ(shard.quantizations(), 1);
        });
      }
    }
  }
}

// A toy model of three GTP weights (the first unaligned) under a quantized
// recipe, each with its Linear's quantizer, and the same whole weights
// quantized without GTP (the reference).
constexpr int kLayers = 3;
const Shape kShapes[kLayers] = {{40, 32}, {64, 32}, {48, 32}};

struct Model {
  std::shared_ptr<ParallelContext> context;
  std::vector<std::unique_ptr<GemmQuantizer>> quantizers;
  std::vector<std::unique_ptr<ShardedWeightSource>> sources;
  ContextPtr ref_context;
  std::vector<std::unique_ptr<GemmQuantizer>> ref_quantizers;
  std::vector<Tensor> whole;
};

Model make_model(Recipe r, std::shared_ptr<comm::ProcessGroup> group) {
  Model m;
  m.context = std::make_shared<ParallelContext>();
  m.context->precision = Precision::of(r);
  enable(*m.context, group);
  m.ref_context = make_context(nullptr, SequenceParallel::off, Precision::of(r));
  for (int i = 0; i < kLayers; ++i) {
    const std::string name = "w" + std::to_string(i);
    m.whole.push_back(weft::testing::random_tensor(kShapes[i], 10 + i));
    const Parameter w = make_parameter(name + ".weight", m.whole.back().clone(),
                                       split_spec(kShapes[i], 0, "tp", 0, 1), true);
    m.sources.push_back(std::make_unique<ShardedWeightSource>(
        w, group, m.context->gtp_runtime, m.context->precision, m.context->exec));
    m.quantizers.push_back(std::make_unique<GemmQuantizer>(*m.context, name, nullptr));
    m.ref_quantizers.push_back(std::make_unique<GemmQuantizer>(*m.ref_context, name, nullptr));
  }
  return m;
}

// One pass: forward over the layers, backward in reverse; every operand
// equals the reference's (the whole weight quantized and decoded). `mark`
// receives the layers' compute points.
void run_pass(Model& m, bool reuse, const std::function<void(const std::string&)>& mark) {
  PassContext pass, ref_pass;
  pass.set_reuse_weight_casts(reuse);
  const auto check = [&](int i, bool col) {
    const Tensor w = m.sources[i]->quantized_weight(*m.quantizers[i], col, pass);
    mark((col ? "backward " : "forward ") + std::to_string(i));
    const Tensor ref =
        m.ref_quantizers[i]->operand(GemmQuantizer::Operand::weight, m.whole[i], col, ref_pass);
    EXPECT_EQ(w.to_vector(), ref.to_vector()) << "layer " << i << (col ? " backward" : " forward");
  };
  for (int i = 0; i < kLayers; ++i) check(i, false);
  for (int i = kLayers - 1; i >= 0; --i) {
    check(i, true);
    Tensor g = m.sources[i]->weight_grad(pass);
    m.sources[i]->finalize_weight_grad(pass, g);
  }
}

int64_t quantizations(const Model& m) {
  int64_t n = 0;
  for (const auto& s : m.sources) n += s->quantizations();
  return n;
}

TEST(QuantizedGtpChain, GathersAlongTheChainOncePerStep) {
  for (Recipe r : kQuantizedRecipes) {
    SCOPED_TRACE(recipe_name(r));
    // Quantizations of one weight in a step: MXFP8's backward has its own copy.
    const int64_t per_step = kLayers * (r == Recipe::mxfp8 ? 2 : 1);
    comm::run_local(2, [&](comm::ProcessGroup& world) {
      auto group = world.new_subgroups_by_enumeration({{0, 1}}, "gtp");
      Model m = make_model(r, group);
      std::mutex mu;
      std::vector<std::string> log;
      const auto mark = [&](const std::string& s) {
        std::lock_guard lock(mu);
        log.push_back(s);
      };
      const auto nothing = [](const std::string&) {};
      run_pass(m, true, nothing);  // records the chain
      EXPECT_EQ(quantizations(m), per_step);
      // The step's second microbatch: prefetched along the chain, nothing
      // quantized again. Before layer 0 computes, layer 1's gather is issued.
      group->set_observer([&](const comm::CommEvent& e) {
        if (e.kind == comm::CommEvent::Kind::issued) mark(std::string(op_kind_name(e.op)));
      });
      run_pass(m, true, mark);
      group->set_observer(nullptr);
      const auto first = std::find(log.begin(), log.end(), "forward 0");
      EXPECT_EQ(std::count(log.begin(), first, "all_gather"), 2);
      EXPECT_EQ(quantizations(m), per_step);
      const PrefetchChain::Stats& stats = m.context->gtp_runtime->chain.stats();
      EXPECT_GT(stats.prefetched, 0);
      EXPECT_LT(stats.quantized_bytes_per_element(), 1.1);
      EXPECT_EQ(stats.quantized_bytes, stats.gathered_bytes);
      // Steady state: no weight-cache allocation.
      const auto cache_allocations = [] {
        return MemoryTracker::current().tag(Device::cpu(), MemoryTag::weight_cache).allocations;
      };
      const int64_t allocations = cache_allocations();
      run_pass(m, true, nothing);
      EXPECT_EQ(cache_allocations(), allocations);
      // The step's end: delayed scaling moves the weight's scale, the same as
      // the whole weight's (the shards' amaxes reduced over gtp), and the
      // shards are quantized again with it.
      m.context->scaling->end_step(m.context->precision, group.get());
      m.ref_context->scaling->end_step(m.ref_context->precision, nullptr);
      for (int i = 0; i < m.context->scaling->size(); ++i) {
        EXPECT_EQ(m.context->scaling->state(i).scale, m.ref_context->scaling->state(i).scale);
      }
      run_pass(m, true, nothing);
      EXPECT_EQ(quantizations(m), per_step * (r == Recipe::fp8_delayed ? 2 : 1));
      // The optimizer writes the weights: quantized again, once.
      const int64_t before = quantizations(m);
      for (int i = 0; i < kLayers; ++i) {
        Parameter& p = m.sources[i]->parameter();
        kernels::scale(ExecContext::host(), p.value, 1.25f);
        ++p.version;
        kernels::scale(ExecContext::host(), m.whole[i], 1.25f);
      }
      run_pass(m, true, nothing);
      run_pass(m, true, nothing);
      EXPECT_EQ(quantizations(m), before + per_step);
      // Passes that do not allow reuse quantize once each.
      run_pass(m, false, nothing);
      EXPECT_EQ(quantizations(m), before + 2 * per_step);
    });
  }
}

// A batch of the three weights (a GroupedLinear's experts, each with its own
// quantizer): one all-gather per use moves every weight's quantized data and
// scales, one reduce-scatter their gradients; each operand is still the whole
// weight quantized, and each shard is quantized once per step, as alone.
TEST(QuantizedGtpBatch, MovesEveryWeightsDataAndScalesInOneGather) {
  for (Recipe r : kQuantizedRecipes) {
    SCOPED_TRACE(recipe_name(r));
    const int64_t per_step = kLayers * (r == Recipe::mxfp8 ? 2 : 1);
    comm::run_local(2, [&](comm::ProcessGroup& world) {
      auto group = world.new_subgroups_by_enumeration({{0, 1}}, "gtp");
      Model m = make_model(r, group);
      std::vector<ShardedWeightSource*> sources;
      std::vector<GemmQuantizer*> quantizers;
      for (int i = 0; i < kLayers; ++i) {
        sources.push_back(m.sources[static_cast<size_t>(i)].get());
        quantizers.push_back(m.quantizers[static_cast<size_t>(i)].get());
      }
      SourceBatch batch(sources, m.context->gtp_runtime);
      for (int pass = 0; pass < 3; ++pass) {
        SCOPED_TRACE(::testing::Message() << "pass " << pass);
        const comm::CommStats before = group->stats();
        PassContext ctx, ref_pass;
        ctx.set_reuse_weight_casts(true);
        for (const bool col : {false, true}) {
          const std::vector<Tensor> ws = batch.quantized_weights(quantizers, col, ctx);
          ASSERT_EQ(ws.size(), static_cast<size_t>(kLayers));
          for (int i = 0; i < kLayers; ++i) {
            const Tensor ref = m.ref_quantizers[static_cast<size_t>(i)]->operand(
                GemmQuantizer::Operand::weight, m.whole[static_cast<size_t>(i)], col, ref_pass);
            EXPECT_EQ(ws[static_cast<size_t>(i)].to_vector(), ref.to_vector())
                << "weight " << i << (col ? " backward" : " forward");
          }
        }
        batch.weight_grads(ctx);
        batch.finalize_weight_grads(ctx);
        const comm::CommStats after = group->stats();
        EXPECT_EQ(after.count(comm::OpKind::all_gather) - before.count(comm::OpKind::all_gather),
                  2);
        EXPECT_EQ(
            after.count(comm::OpKind::reduce_scatter) - before.count(comm::OpKind::reduce_scatter),
            1);
        EXPECT_EQ(quantizations(m), per_step);
      }
      const PrefetchChain::Stats& stats = m.context->gtp_runtime->chain.stats();
      EXPECT_EQ(stats.quantized_bytes, stats.gathered_bytes);
      EXPECT_LT(stats.quantized_bytes_per_element(), 1.1);
    });
  }
}

}  // namespace
}  // namespace weft::parallel::gtp
