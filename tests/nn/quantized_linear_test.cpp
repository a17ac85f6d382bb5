// A quantized Linear's GEMMs against an fp64 product of the operands
// quantized and dequantized independently with kernels/cast.h: the emulation
// multiplies exactly the quantized values, accumulating in f32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "testing.h"
#include "weft/comm/local.h"
#include "weft/kernels/cast.h"
#include "weft/nn/linear.h"
#include "weft/parallel/scaling.h"

namespace weft::nn {
namespace {

using weft::testing::close;
using weft::testing::random_tensor;

constexpr int64_t kTokens = 48, kIn = 64, kOut = 96;

// x (rows, cols) quantized as `recipe` quantizes `which` for its first
// step, dequantized (column-wise: blocks down the columns) back in x's layout.
std::vector<double> reference_operand(parallel::Recipe recipe, const Tensor& x, bool weight,
                                      bool grad, bool columnwise) {
  const ExecContext& ec = ExecContext::host();
  kernels::QuantizeConfig cfg;
  switch (recipe) {
    case parallel::Recipe::fp8_delayed:  // the first step's scale is 1
      cfg.dtype = grad ? DType::e5m2 : DType::e4m3;
      break;
    case parallel::Recipe::fp8_current:
      cfg.dtype = grad ? DType::e5m2 : DType::e4m3;
      cfg.scale = dtype_max(cfg.dtype) / kernels::amax(ec, x);
      break;
    case parallel::Recipe::fp8_block:
      cfg.mode = weight ? ScalingMode::block_128x128 : ScalingMode::block_1x128;
      cfg.dtype = grad ? DType::e5m2 : DType::e4m3;
      cfg.rowwise = weight || !columnwise;
      cfg.columnwise = !weight && columnwise;
      break;
    case parallel::Recipe::mxfp8:
      cfg.mode = ScalingMode::block_1x32;
      cfg.rowwise = !columnwise;
      cfg.columnwise = columnwise;
      break;
    default:
      cfg.mode = weight ? ScalingMode::block_16x16 : ScalingMode::block_1x16;
      cfg.dtype = DType::e2m1;
      cfg.rowwise = weight || !columnwise;
      cfg.columnwise = !weight && columnwise;
  }
  QuantizedTensor q;
  kernels::quantize(ec, x, cfg, q);
  Tensor out = Tensor::empty(x.shape());
  kernels::dequantize(ec, q, q.has_columnwise() && !q.has_rowwise(), out);
  std::vector<float> v = out.to_vector();
  return {v.begin(), v.end()};
}

class QuantizedLinear : public ::testing::TestWithParam<parallel::Recipe> {};

TEST_P(QuantizedLinear, GemmsMatchAnFp64ProductOfTheQuantizedOperands) {
  const parallel::Recipe recipe = GetParam();
  parallel::Precision p = parallel::Precision::of(recipe);
  p.stochastic_rounding = false;
  p.hadamard = false;
  Linear lin(parallel::make_context(nullptr, parallel::SequenceParallel::off, p, 5),
             {.name = "lin", .in = kIn, .out = kOut});
  const Tensor x = random_tensor({kTokens, kIn}, 1, -3.0f, 3.0f);
  const Tensor dy = random_tensor({kTokens, kOut}, 2, -0.01f, 0.01f);
  Ctx ctx;
  const Tensor y = lin.forward(ctx, x);
  const Tensor dx = lin.backward(ctx, dy);
  const Tensor& w = lin.weight().value;

  const std::vector<double> xq = reference_operand(recipe, x, false, false, false);
  const std::vector<double> wq = reference_operand(recipe, w, true, false, false);
  std::vector<double> y_ref(static_cast<size_t>(kTokens * kOut), 0.0);
  for (int64_t t = 0; t < kTokens; ++t)
    for (int64_t o = 0; o < kOut; ++o) {
      double s = 0;
      for (int64_t i = 0; i < kIn; ++i)
        s += xq[static_cast<size_t>(t * kIn + i)] * wq[static_cast<size_t>(o * kIn + i)];
      y_ref[static_cast<size_t>(t * kOut + o)] = s;  // the bias starts at 0
    }
  EXPECT_TRUE(close(y_ref, y.to_vector(), {1e-5, 1e-6}, 1.0));

  // dgrad: dy row-wise, W column-wise.
  const std::vector<double> dyq = reference_operand(recipe, dy, false, true, false);
  const std::vector<double> wc = reference_operand(recipe, w, true, false, true);
  std::vector<double> dx_ref(static_cast<size_t>(kTokens * kIn), 0.0);
  for (int64_t t = 0; t < kTokens; ++t)
    for (int64_t i = 0; i < kIn; ++i) {
      double s = 0;
      for (int64_t o = 0; o < kOut; ++o)
        s += dyq[static_cast<size_t>(t * kOut + o)] * wc[static_cast<size_t>(o * kIn + i)];
      dx_ref[static_cast<size_t>(t * kIn + i)] = s;
    }
  EXPECT_TRUE(close(dx_ref, dx.to_vector(), {1e-5, 1e-7}, 1e-3));

  // wgrad: dy and x column-wise.
  const std::vector<double> dyc = reference_operand(recipe, dy, false, true, true);
  const std::vector<double> xc = reference_operand(recipe, x, false, false, true);
  std::vector<double> dw_ref(static_cast<size_t>(kOut * kIn), 0.0);
  for (int64_t o = 0; o < kOut; ++o)
    for (int64_t i = 0; i < kIn; ++i) {
      double s = 0;
      for (int64_t t = 0; t < kTokens; ++t)
        s += dyc[static_cast<size_t>(t * kOut + o)] * xc[static_cast<size_t>(t * kIn + i)];
      dw_ref[static_cast<size_t>(o * kIn + i)] = s;
    }
  EXPECT_TRUE(close(dw_ref, lin.weight().grad.to_vector(), {1e-5, 1e-7}, 1e-2));
  // And the quantization is real: the product differs from the f32 one.
  Linear plain(parallel::make_context(nullptr, parallel::SequenceParallel::off, {}, 5),
               {.name = "lin", .in = kIn, .out = kOut});
  Ctx pctx;
  EXPECT_FALSE(close(plain.forward(pctx, x), y, {1e-4, 1e-6}, 1.0));
}

INSTANTIATE_TEST_SUITE_P(Recipes, QuantizedLinear, ::testing::ValuesIn(parallel::kQuantizedRecipes),
                         [](const auto& p) {
                           std::string n = parallel::recipe_name(p.param);
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

TEST(QuantizedLinear, F32AndBf16HaveNoQuantizer) {
  // Under f32 and bf16 nothing registers scaling state and the GEMM path is
  // the plain one (the rest of the suite checks its numbers).
  for (DType d : {DType::f32, DType::bf16}) {
    auto pc = parallel::make_context(nullptr, parallel::SequenceParallel::off,
                                     parallel::Precision::of(d), 5);
    Linear lin(pc, {.name = "lin", .in = kIn, .out = kOut});
    EXPECT_EQ(pc->scaling->size(), 0);
  }
}

}  // namespace
}  // namespace weft::nn

namespace weft::parallel {
namespace {

// What a weight source that gathers quantized shards relies on: the
// quantized weight and the operand made from it are the operand the Linear
// would multiply (here without a gather: the shard is the whole weight).
TEST(GemmQuantizer, QuantizedWeightGivesTheSameOperand) {
  for (Recipe r : kQuantizedRecipes) {
    SCOPED_TRACE(recipe_name(r));
    auto pc = make_context(nullptr, SequenceParallel::off, Precision::of(r), 5);
    GemmQuantizer q(*pc, "w", nullptr);
    const Tensor w = weft::testing::random_tensor({64, 96}, 4);
    PassContext pass;
    for (bool col : {false, true}) {
      const Tensor direct = q.operand(GemmQuantizer::Operand::weight, w, col, pass).clone();
      const QuantizedTensor& qt = q.quantized(GemmQuantizer::Operand::weight, w, col, pass);
      EXPECT_EQ(q.operand_of(qt, col).to_vector(), direct.to_vector());
    }
  }
}

}  // namespace
}  // namespace weft::parallel

namespace weft::nn {
namespace {

using parallel::QuantizedGemm;

// A context of its own (workspace, scaling state) under `recipe`, its GEMMs
// native or emulated.
std::shared_ptr<parallel::ParallelContext> native_context(std::shared_ptr<comm::ProcessGroup> tp,
                                                          parallel::SequenceParallel sp,
                                                          parallel::Recipe recipe,
                                                          QuantizedGemm mode,
                                                          DType activations = DType::f32) {
  parallel::Precision p = parallel::Precision::of(recipe);
  p.quantized_activations = activations;
  auto pc =
      std::make_shared<parallel::ParallelContext>(*parallel::make_context(std::move(tp), sp, p, 5));
  pc->workspace = std::make_shared<parallel::Workspace>();
  pc->scaling = std::make_shared<parallel::ScalingRegistry>();
  pc->quantized_gemm = mode;
  return pc;
}

// Whether the context's quantizers made a transposed (column-wise) input
// copy: native per-tensor GEMMs do (the TN operands), the emulation never.
bool made_transposed_inputs(const parallel::ParallelContext& pc) {
  return pc.workspace->quantize.quantized[1].has_columnwise();
}

// Native quantized GEMMs (kernels::quantized_gemm on the TN copies) give the
// emulation's results bit for bit on the CPU, whose quantized_gemm is that
// emulation: outputs, input and weight gradients, bias gradients, over two
// steps (delayed scaling moves its scales in between), for a column-parallel
// then a row-parallel layer at TP 1 and 2, with and without sequence
// parallelism (whose gathering GEMMs stay on the dequantized operands).
TEST(QuantizedLinearNative, EqualsTheEmulationBitForBit) {
  for (const auto& [r, act] : {std::pair{parallel::Recipe::fp8_delayed, DType::f32},
                               std::pair{parallel::Recipe::fp8_current, DType::f32},
                               std::pair{parallel::Recipe::fp8_delayed, DType::bf16}}) {
    for (const auto& [tp_size, sp] : {std::pair{1, parallel::SequenceParallel::off},
                                      std::pair{2, parallel::SequenceParallel::off},
                                      std::pair{2, parallel::SequenceParallel::seq}}) {
      SCOPED_TRACE(::testing::Message()
                   << parallel::recipe_name(r) << " " << dtype_name(act) << " tp " << tp_size << " "
                   << parallel::sequence_parallel_name(sp));
      comm::run_local(tp_size, [&](comm::ProcessGroup& world) {
        std::shared_ptr<comm::ProcessGroup> tp =
            tp_size > 1 ? world.new_subgroups_by_enumeration({{0, 1}}, "tp") : nullptr;
        struct Pair {
          std::shared_ptr<parallel::ParallelContext> pc;
          std::unique_ptr<Linear> a, b;
        };
        auto make = [&](QuantizedGemm mode) {
          Pair p;
          p.pc = native_context(tp, sp, r, mode, act);
          const Parallel first = tp_size > 1 ? Parallel::column : Parallel::none;
          const Parallel second = tp_size > 1 ? Parallel::row : Parallel::none;
          p.a = std::make_unique<Linear>(
              p.pc, LinearConfig{.name = "a", .in = kIn, .out = kOut, .mode = first});
          p.b = std::make_unique<Linear>(
              p.pc, LinearConfig{.name = "b", .in = kOut, .out = kIn, .mode = second});
          return p;
        };
        Pair emu = make(QuantizedGemm::emulate), nat = make(QuantizedGemm::native);
        for (int step = 0; step < 2; ++step) {
          const int64_t rows = sp == parallel::SequenceParallel::off ? kTokens : kTokens / 2;
          const Tensor x =
              random_tensor({rows, kIn}, 7 + static_cast<uint32_t>(step), -3.0f, 3.0f).to(act);
          const Tensor dy =
              random_tensor({rows, kIn}, 9 + static_cast<uint32_t>(step), -0.1f, 0.1f).to(act);
          std::vector<std::vector<float>> got[2];
          for (int k = 0; k < 2; ++k) {
            Pair& p = k == 0 ? emu : nat;
            Ctx ctx;
            const Tensor y = p.b->forward(ctx, p.a->forward(ctx, x));
            const Tensor dx = p.a->backward(ctx, p.b->backward(ctx, dy));
            got[k] = {y.to(DType::f32).to_vector(),   dx.to(DType::f32).to_vector(),
                      p.a->weight().grad.to_vector(), p.b->weight().grad.to_vector(),
                      p.a->bias()->grad.to_vector(),  p.b->bias()->grad.to_vector()};
            p.pc->scaling->end_step(p.pc->precision, tp.get());
          }
          for (size_t i = 0; i < got[0].size(); ++i) EXPECT_EQ(got[0][i], got[1][i]) << i;
        }
        EXPECT_FALSE(made_transposed_inputs(*emu.pc));
        EXPECT_TRUE(made_transposed_inputs(*nat.pc));
      });
    }
  }
}

TEST(QuantizedLinearNative, TheEnvironmentChoosesOnlyWhereTheContextLeavesItOpen) {
  const auto native_of = [](QuantizedGemm mode, parallel::Recipe r) {
    auto pc = native_context(nullptr, parallel::SequenceParallel::off, r, mode);
    return parallel::GemmQuantizer(*pc, "w", nullptr).native_gemm();
  };
  ::setenv("WEFT_FP8_GEMM", "native", 1);
  EXPECT_TRUE(native_of(QuantizedGemm::automatic, parallel::Recipe::fp8_delayed));
  EXPECT_FALSE(native_of(QuantizedGemm::emulate, parallel::Recipe::fp8_current));
  // The block-scaled recipes always emulate.
  EXPECT_FALSE(native_of(QuantizedGemm::native, parallel::Recipe::mxfp8));
  EXPECT_FALSE(native_of(QuantizedGemm::automatic, parallel::Recipe::fp8_block));
  ::setenv("WEFT_FP8_GEMM", "emulate", 1);
  EXPECT_FALSE(native_of(QuantizedGemm::automatic, parallel::Recipe::fp8_delayed));
  EXPECT_TRUE(native_of(QuantizedGemm::native, parallel::Recipe::fp8_delayed));
  ::setenv("WEFT_FP8_GEMM", "fast", 1);
  EXPECT_THROW(native_of(QuantizedGemm::automatic, parallel::Recipe::fp8_delayed), Error);
  ::unsetenv("WEFT_FP8_GEMM");
  // The CPU emulates by default, and the path says why.
  EXPECT_FALSE(native_of(QuantizedGemm::automatic, parallel::Recipe::fp8_delayed));
  const parallel::QuantizedGemmPath cpu =
      parallel::quantized_gemm_path(Device::cpu(), parallel::Recipe::fp8_delayed);
  EXPECT_FALSE(cpu.native);
  EXPECT_NE(cpu.text.find("the CPU has no FP8 arithmetic"), std::string::npos) << cpu.text;
  const parallel::QuantizedGemmPath block = parallel::quantized_gemm_path(
      Device::cpu(), parallel::Recipe::fp8_block, QuantizedGemm::native);
  EXPECT_FALSE(block.native);
  EXPECT_NE(block.text.find("fp8-block has no native"), std::string::npos) << block.text;
}

}  // namespace
}  // namespace weft::nn
