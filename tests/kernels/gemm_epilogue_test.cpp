// GEMM epilogues (GemmOptions::epilogue) on the CPU: each is exactly the
// unfused sequence gemm.h writes next to it, bit for bit; the CPU never
// fuses. (cuda_gemm_epilogue_test.cpp compares a GPU's fused epilogues with
// these.)
#include <gtest/gtest.h>

#include <string>

#include "bitwise.h"
#include "testing.h"
#include "weft/kernels/activation.h"
#include "weft/kernels/gemm.h"

namespace weft::kernels {
namespace {

const ExecContext& ec = ExecContext::host();

using weft::testing::bitwise_equal;
using weft::testing::random_tensor;

struct Case {
  int64_t m, n, k;
  DType in = DType::f32, out = DType::f32;
  bool ta = false, tb = false;

  std::string str() const {
    return fmt::format("{}x{}x{} {}->{} ta={} tb={}", m, n, k, dtype_name(in), dtype_name(out), ta,
                       tb);
  }
  Tensor a(uint32_t seed) const {
    return ta ? random_tensor({k, m}, seed, -1, 1, in) : random_tensor({m, k}, seed, -1, 1, in);
  }
  Tensor b(uint32_t seed) const {
    return tb ? random_tensor({n, k}, seed, -1, 1, in) : random_tensor({k, n}, seed, -1, 1, in);
  }
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (DType in : {DType::f32, DType::bf16}) {
    for (DType o : {DType::f32, DType::bf16}) {
      for (int t = 0; t < 4; ++t) {
        out.push_back({.m = 37,
                       .n = 24,
                       .k = 53,
                       .in = in,
                       .out = o,
                       .ta = (t & 1) != 0,
                       .tb = (t & 2) != 0});
      }
    }
  }
  return out;
}

TEST(GemmEpilogue, GeluAuxIsTheGemmThenGelu) {
  for (const Case& cs : cases()) {
    for (bool with_bias : {false, true}) {
      SCOPED_TRACE(cs.str() + (with_bias ? " bias" : ""));
      const Tensor a = cs.a(1), b = cs.b(2), bias = random_tensor({cs.n}, 3);
      const Tensor* bp = with_bias ? &bias : nullptr;
      Tensor want_aux = Tensor::empty({cs.m, cs.n}, cs.out);
      Tensor want = Tensor::empty({cs.m, cs.n}, cs.out);
      gemm(ec, a, b, want_aux, {.trans_a = cs.ta, .trans_b = cs.tb, .bias = bp});
      gelu_forward(ec, want_aux, want);

      Tensor aux = Tensor::empty({cs.m, cs.n}, cs.out);
      Tensor c = Tensor::empty({cs.m, cs.n}, cs.out);
      const GemmOptions opt{.trans_a = cs.ta,
                            .trans_b = cs.tb,
                            .bias = bp,
                            .epilogue = GemmEpilogue::gelu_aux,
                            .aux = &aux};
      EXPECT_FALSE(gemm_epilogue_fused(ec, a, b, c, opt));
      gemm(ec, a, b, c, opt);
      EXPECT_TRUE(bitwise_equal(want_aux, aux));
      EXPECT_TRUE(bitwise_equal(want, c));
    }
  }
}

TEST(GemmEpilogue, DgeluBgradIsTheGemmThenGeluBackwardThenColumnSums) {
  for (const Case& cs : cases()) {
    for (bool with_grad : {false, true}) {
      SCOPED_TRACE(cs.str() + (with_grad ? " bias_grad" : ""));
      const Tensor a = cs.a(4), b = cs.b(5);
      const Tensor pre = random_tensor({cs.m, cs.n}, 6, -3, 3, cs.out);
      const Tensor grad0 = random_tensor({cs.n}, 7);
      Tensor want = Tensor::empty({cs.m, cs.n}, cs.out);
      Tensor want_grad = grad0.clone();
      Tensor da = Tensor::empty({cs.m, cs.n}, cs.out);
      gemm(ec, a, b, da, {.trans_a = cs.ta, .trans_b = cs.tb});
      gelu_backward(ec, da, pre, want);
      bias_backward(ec, want, want_grad);

      Tensor aux = pre.clone();
      Tensor c = Tensor::empty({cs.m, cs.n}, cs.out);
      Tensor grad = grad0.clone();
      const GemmOptions opt{.trans_a = cs.ta,
                            .trans_b = cs.tb,
                            .epilogue = GemmEpilogue::dgelu_bgrad,
                            .aux = &aux,
                            .bias_grad = with_grad ? &grad : nullptr};
      EXPECT_FALSE(gemm_epilogue_fused(ec, a, b, c, opt));
      gemm(ec, a, b, c, opt);
      EXPECT_TRUE(bitwise_equal(want, c));
      EXPECT_TRUE(bitwise_equal(pre, aux));  // read only
      EXPECT_TRUE(bitwise_equal(with_grad ? want_grad : grad0, grad));
    }
  }
}

// The wgrad GEMM dW (+)= dyᵀ·x with db += Σ_rows dy.
TEST(GemmEpilogue, BgradAIsTheGemmThenTheColumnSumsOfA) {
  for (DType in : {DType::f32, DType::bf16}) {
    for (DType out : {DType::f32, DType::bf16}) {
      for (bool accumulate : {false, true}) {
        for (bool tb : {false, true}) {
          SCOPED_TRACE(
              fmt::format("{}->{} acc={} tb={}", dtype_name(in), dtype_name(out), accumulate, tb));
          const int64_t tokens = 67, o = 40, i = 24;
          const Tensor dy = random_tensor({tokens, o}, 8, -1, 1, in);
          const Tensor x = tb ? random_tensor({i, tokens}, 9, -1, 1, in)
                              : random_tensor({tokens, i}, 9, -1, 1, in);
          const Tensor w0 = random_tensor({o, i}, 10, -1, 1, out);
          const Tensor db0 = random_tensor({o}, 11);
          Tensor want = w0.clone(), want_db = db0.clone();
          gemm(ec, dy, x, want, {.trans_a = true, .trans_b = tb, .accumulate = accumulate});
          bias_backward(ec, dy, want_db);

          Tensor dw = w0.clone(), db = db0.clone();
          const GemmOptions opt{.trans_a = true,
                                .trans_b = tb,
                                .accumulate = accumulate,
                                .epilogue = GemmEpilogue::bgrad_a,
                                .bias_grad = &db};
          EXPECT_FALSE(gemm_epilogue_fused(ec, dy, x, dw, opt));
          gemm(ec, dy, x, dw, opt);
          EXPECT_TRUE(bitwise_equal(want, dw));
          EXPECT_TRUE(bitwise_equal(want_db, db));
        }
      }
    }
  }
}

TEST(GemmEpilogue, NoneIsNeverFused) {
  const Tensor a = random_tensor({8, 8}, 12), b = random_tensor({8, 8}, 13);
  const Tensor c = Tensor::empty({8, 8});
  EXPECT_FALSE(gemm_epilogue_fused(ec, a, b, c, {}));
  EXPECT_STREQ(gemm_epilogue_name(GemmEpilogue::dgelu_bgrad), "dgelu_bgrad");
}

TEST(GemmEpilogue, ArgumentsAreChecked) {
  const Tensor a = random_tensor({8, 16}, 14), b = random_tensor({16, 8}, 15);
  Tensor c = Tensor::empty({8, 8}), aux = Tensor::empty({8, 8});
  Tensor aux_bf16 = Tensor::empty({8, 8}, DType::bf16), aux_small = Tensor::empty({8, 4});
  Tensor db8 = Tensor::zeros({8}), db16 = Tensor::zeros({16});
  const Tensor bias = Tensor::zeros({8});
  using E = GemmEpilogue;
  // alpha, accumulate
  EXPECT_THROW(gemm(ec, a, b, c, {.alpha = 0.5f, .epilogue = E::gelu_aux, .aux = &aux}), Error);
  EXPECT_THROW(gemm(ec, a, b, c, {.accumulate = true, .epilogue = E::gelu_aux, .aux = &aux}),
               Error);
  EXPECT_THROW(gemm(ec, a, b, c, {.accumulate = true, .epilogue = E::dgelu_bgrad, .aux = &aux}),
               Error);
  // aux missing, of another shape or dtype, or c itself
  EXPECT_THROW(gemm(ec, a, b, c, {.epilogue = E::gelu_aux}), Error);
  EXPECT_THROW(gemm(ec, a, b, c, {.epilogue = E::gelu_aux, .aux = &aux_small}), Error);
  EXPECT_THROW(gemm(ec, a, b, c, {.epilogue = E::dgelu_bgrad, .aux = &aux_bf16}), Error);
  EXPECT_THROW(gemm(ec, a, b, c, {.epilogue = E::gelu_aux, .aux = &c}), Error);
  // a bias where the epilogue takes none, bias gradients of the wrong size
  EXPECT_THROW(gemm(ec, a, b, c, {.bias = &bias, .epilogue = E::dgelu_bgrad, .aux = &aux}), Error);
  EXPECT_THROW(gemm(ec, a, b, c, {.epilogue = E::gelu_aux, .aux = &aux, .bias_grad = &db8}), Error);
  EXPECT_THROW(gemm(ec, a, b, c, {.epilogue = E::dgelu_bgrad, .aux = &aux, .bias_grad = &db16}),
               Error);
  // bgrad_a sums a's columns: trans_a, and a gradient of m elements
  EXPECT_THROW(gemm(ec, a, b, c, {.epilogue = E::bgrad_a, .bias_grad = &db8}), Error);
  const Tensor at = random_tensor({16, 8}, 16);
  EXPECT_THROW(gemm(ec, at, b, c, {.trans_a = true, .epilogue = E::bgrad_a}), Error);
  EXPECT_THROW(gemm(ec, at, b, c, {.trans_a = true, .epilogue = E::bgrad_a, .bias_grad = &db16}),
               Error);
  EXPECT_NO_THROW(gemm(ec, at, b, c, {.trans_a = true, .epilogue = E::bgrad_a, .bias_grad = &db8}));
  // The query checks the same.
  EXPECT_THROW((void)gemm_epilogue_fused(ec, a, b, c, {.epilogue = E::gelu_aux}), Error);
  EXPECT_THROW((void)gemm_epilogue_fused(ec, a, b, c, {.epilogue = E::bgrad_a, .bias_grad = &db8}),
               Error);
}

}  // namespace
}  // namespace weft::kernels
