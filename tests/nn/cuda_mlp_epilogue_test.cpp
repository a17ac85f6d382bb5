// LayerNormMLP (GELU) on a GPU at TP 1, where cuBLASLt's epilogues run
// fc1 + GELU (GELU_AUX_BIAS), fc2's dgrad with the GELU gradient and fc1's
// bias gradient (DGELU_BGRAD) on bf16, and the wgrad GEMMs' bias gradients
// (BGRADB), against the same MLP on the CPU, which runs the unfused
// sequence. Tolerances as layer_cases.cpp: bf16 kBF16 of the tensor's
// largest magnitude (a fused GEMM rounds once where the sequence rounds
// twice, and rounds a bf16 output's bias gradient to bf16); f32 kF32 of
// max(|value|, 1) (only the bias gradients fuse, whose sums change order).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "contexts.h"
#include "cuda_testing.h"
#include "testing.h"
#include "weft/kernels/gemm.h"
#include "weft/nn/layernorm_mlp.h"

namespace weft::nn {
namespace {

using weft::testing::close;
using weft::testing::kBF16;
using weft::testing::kF32;
using weft::testing::random_tensor;

double max_abs(const Tensor& t) {
  double m = 0;
  for (float v : t.to(Device::cpu()).to_vector())
    m = std::max(m, std::fabs(static_cast<double>(v)));
  return m;
}

::testing::AssertionResult near(const Tensor& expected, const Tensor& actual, bool bf16) {
  const Tensor e = expected.to(Device::cpu()).to(DType::f32);
  const Tensor a = actual.to(Device::cpu()).to(DType::f32);
  return bf16 ? close(e, a, kBF16, max_abs(e)) : close(e, a, kF32, 1.0);
}

TEST(CudaMlpEpilogue, GeluMlpMatchesCpu) {
  WEFT_REQUIRE_GPU();
  const int64_t b = 4, t = 16, c = 64, h = 256;
  for (DType compute : {DType::bf16, DType::f32}) {
    const bool bf16 = compute == DType::bf16;
    SCOPED_TRACE(dtype_name(compute));
    const LayerNormMLPConfig cfg{
        .name = "h.0.mlp", .norm_name = "h.0.ln_2", .width = c, .hidden = h, .layers = 2};
    LayerNormMLP ref(host_ctx_of(nullptr, parallel::SequenceParallel::off, compute, 3), cfg);
    std::unique_ptr<LayerNormMLP> mod;
    {
      const ScopedTestDevice on_gpu(Device::cuda(0));
      mod = std::make_unique<LayerNormMLP>(
          ctx_of(nullptr, parallel::SequenceParallel::off, compute, 3), cfg);
    }
    const Tensor x = random_tensor({b, t, c}, 11), dy = random_tensor({b, t, c}, 12);
    Ctx rctx, ctx;
    const Tensor y_ref = ref.forward(rctx, x);
    const Tensor dx_ref = ref.backward(rctx, dy);
    const Tensor y = mod->forward(ctx, x.to(Device::cuda(0)));
    const Tensor dx = mod->backward(ctx, dy.to(Device::cuda(0)));
    EXPECT_TRUE(near(y_ref, y, bf16));
    EXPECT_TRUE(near(dx_ref, dx, bf16));
    const std::vector<Parameter*> mine = mod->parameters(), theirs = ref.parameters();
    ASSERT_EQ(mine.size(), theirs.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      SCOPED_TRACE(mine[i]->name);
      EXPECT_TRUE(near(theirs[i]->grad, mine[i]->grad, bf16));
    }
    if (bf16) {
      // The fused path is what ran: cuBLASLt takes fc1's epilogue here.
      const ExecContext ec = ExecContext::cuda(0);
      const Tensor xn = ec.empty({b * t, c}, DType::bf16), w1 = ec.empty({h, c}, DType::bf16);
      const Tensor bias = ec.empty({h});
      Tensor pre = ec.empty({b * t, h}, DType::bf16), act = ec.empty({b * t, h}, DType::bf16);
      EXPECT_TRUE(kernels::gemm_epilogue_fused(ec, xn, w1, act,
                                               {.trans_b = true,
                                                .bias = &bias,
                                                .epilogue = kernels::GemmEpilogue::gelu_aux,
                                                .aux = &pre}));
    }
  }
}

}  // namespace
}  // namespace weft::nn
