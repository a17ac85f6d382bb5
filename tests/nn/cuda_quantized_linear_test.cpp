// Native FP8 GEMMs on a GPU (GemmQuantizer::native_gemm: cuBLASLt FP8 on the
// quantized operands' TN copies) against the same Linear on the same GPU
// multiplying the dequantized f32 operands: the operands are the same
// quantized values, so the results differ only by the FP8 tensor cores'
// accumulation (measured 1-1.6e-4 relative for kernels::quantized_gemm on an
// H200): 2e-3 of the largest |value|.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "contexts.h"
#include "cuda_testing.h"
#include "testing.h"
#include "weft/core/cuda.h"
#include "weft/nn/linear.h"
#include "weft/parallel/scaling.h"

namespace weft::nn {
namespace {

::testing::AssertionResult near_in_scale(const Tensor& expected, const Tensor& actual) {
  const std::vector<float> e = expected.to(Device::cpu()).to_vector();
  const std::vector<float> a = actual.to(Device::cpu()).to_vector();
  if (e.size() != a.size()) return ::testing::AssertionFailure() << "sizes differ";
  double scale = 0, worst = 0;
  for (float v : e) scale = std::max(scale, static_cast<double>(std::fabs(v)));
  for (size_t i = 0; i < e.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(e[i] - a[i])));
  }
  if (worst <= 2e-3 * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "largest difference " << worst << " against the scale " << scale;
}

TEST(CudaQuantizedLinear, NativeFp8GemmsMatchTheEmulation) {
  WEFT_REQUIRE_GPU();
  if (cuda::compute_capability(0) < 89) GTEST_SKIP() << "FP8 GEMMs need sm_89 or newer";
  const ExecContext ec = ExecContext::cuda(0);
  for (parallel::Recipe r : {parallel::Recipe::fp8_delayed, parallel::Recipe::fp8_current}) {
    SCOPED_TRACE(parallel::recipe_name(r));
    auto make = [&](parallel::QuantizedGemm mode) {
      auto pc = std::make_shared<parallel::ParallelContext>(*parallel::make_context(
          nullptr, parallel::SequenceParallel::off, parallel::Precision::of(r), 5));
      pc->exec = ec;
      pc->workspace = std::make_shared<parallel::Workspace>();
      pc->scaling = std::make_shared<parallel::ScalingRegistry>();
      pc->quantized_gemm = mode;
      return std::make_unique<Linear>(pc, LinearConfig{.name = "lin", .in = 256, .out = 384});
    };
    auto emu = make(parallel::QuantizedGemm::emulate);
    auto nat = make(parallel::QuantizedGemm::automatic);  // native on an sm_89+ GPU
    const Tensor x = weft::testing::random_tensor({128, 256}, 1, -3.0f, 3.0f).to(ec.device());
    const Tensor dy = weft::testing::random_tensor({128, 384}, 2, -0.1f, 0.1f).to(ec.device());
    Ctx c1, c2;
    const Tensor y1 = emu->forward(c1, x), y2 = nat->forward(c2, x);
    const Tensor dx1 = emu->backward(c1, dy), dx2 = nat->backward(c2, dy);
    EXPECT_TRUE(near_in_scale(y1, y2));
    EXPECT_TRUE(near_in_scale(dx1, dx2));
    EXPECT_TRUE(near_in_scale(emu->weight().grad, nat->weight().grad));
    EXPECT_TRUE(near_in_scale(emu->bias()->grad, nat->bias()->grad));
  }
}

// Shapes cuBLASLt's FP8 kernels refuse (k = 88 features, 100 tokens: the
// wgrad's k; 40 outputs) and bf16 activations: the GEMMs that cannot be
// native run the emulation on the GPU, and the layer still matches.
TEST(CudaQuantizedLinear, AwkwardShapesAndBf16Activations) {
  WEFT_REQUIRE_GPU();
  const ExecContext ec = ExecContext::cuda(0);
  for (DType act : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(act));
    auto make = [&](parallel::QuantizedGemm mode) {
      parallel::Precision p = parallel::Precision::of(parallel::Recipe::fp8_delayed);
      p.quantized_activations = act;
      auto pc = std::make_shared<parallel::ParallelContext>(
          *parallel::make_context(nullptr, parallel::SequenceParallel::off, p, 5));
      pc->exec = ec;
      pc->workspace = std::make_shared<parallel::Workspace>();
      pc->scaling = std::make_shared<parallel::ScalingRegistry>();
      pc->quantized_gemm = mode;
      return std::make_unique<Linear>(pc, LinearConfig{.name = "lin", .in = 88, .out = 40});
    };
    auto emu = make(parallel::QuantizedGemm::emulate);
    auto nat = make(parallel::QuantizedGemm::native);
    const Tensor x =
        weft::testing::random_tensor({100, 88}, 1, -3.0f, 3.0f).to(act).to(ec.device());
    const Tensor dy =
        weft::testing::random_tensor({100, 40}, 2, -0.1f, 0.1f).to(act).to(ec.device());
    Ctx c1, c2;
    const Tensor y1 = emu->forward(c1, x), y2 = nat->forward(c2, x);
    EXPECT_EQ(y2.dtype(), act);
    const Tensor dx1 = emu->backward(c1, dy), dx2 = nat->backward(c2, dy);
    EXPECT_EQ(dx2.dtype(), act);
    EXPECT_TRUE(near_in_scale(y1.to(DType::f32), y2.to(DType::f32)));
    EXPECT_TRUE(near_in_scale(dx1.to(DType::f32), dx2.to(DType::f32)));
    EXPECT_TRUE(near_in_scale(emu->weight().grad, nat->weight().grad));
  }
}

}  // namespace
}  // namespace weft::nn
