// GEMM epilogues on the GPU (cuBLASLt's GELU_AUX(_BIAS), DGELU(_BGRAD) and
// BGRADB) against the CPU's unfused sequences on the same inputs, and the
// GPU's own unfused fallback (shapes and buffers the epilogues refuse)
// against the GPU's sequence, bit for bit.
//
// Tolerances: products as cuda_gemm_test.cpp (an f32 output within rel 1e-5
// or abs 1e-5·sqrt(k), a bf16 one within kBF16 of max(|value|, 1)). What
// passes through cuBLASLt's GELU may use the hardware tanh (tanh.approx.f32,
// relative error ~2^-11), so an f32 activation or GELU gradient gets rel 1e-3
// of max(|value|, 1); a fused bf16 one is rounded once where the CPU's
// sequence rounds twice, within kBF16. A bias gradient is a sum over rows of
// such values, and a bf16 output's is rounded to bf16 by cuBLASLt: each
// column is allowed the same relative error of the sum of its terms'
// magnitudes (and of the gradient it is added to).
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "bitwise.h"
#include "cuda_testing.h"
#include "testing.h"
#include "weft/kernels/activation.h"
#include "weft/kernels/gemm.h"
#include "weft/kernels/impl/gemm.h"

namespace weft::kernels {
namespace {

using weft::testing::bitwise_equal;
using weft::testing::close;
using weft::testing::gpu;
using weft::testing::host;
using weft::testing::kBF16;
using weft::testing::random_tensor;
using weft::testing::Tolerance;

const ExecContext& gpu_context() {
  static const ExecContext ec = ExecContext::cuda(0);
  return ec;
}
const ExecContext& cpu = ExecContext::host();

Tolerance product_tolerance(DType out, int64_t k) {
  if (out == DType::bf16) return kBF16;
  return {1e-5, 1e-5 * std::sqrt(static_cast<double>(k))};
}
Tolerance activation_tolerance(DType out) {
  return out == DType::bf16 ? kBF16 : Tolerance{1e-3, 1e-5};
}

// got (n) against want (n): |got - want| <= rel·(Σ_rows |terms[:, j]| +
// |start[j]|) + 1e-5 for every column j of terms (rows, n).
::testing::AssertionResult sums_close(const Tensor& want, const Tensor& got, const Tensor& terms,
                                      const Tensor& start, double rel) {
  const std::vector<float> w = host(want).to_vector(), g = host(got).to_vector();
  const std::vector<float> t = host(terms).to_vector(), s = host(start).to_vector();
  const size_t n = w.size();
  for (size_t j = 0; j < n; ++j) {
    double magnitude = std::abs(s[j]);
    for (size_t i = j; i < t.size(); i += n) magnitude += std::abs(t[i]);
    const double diff = std::abs(static_cast<double>(g[j]) - w[j]);
    if (!(diff <= rel * magnitude + 1e-5)) {
      return ::testing::AssertionFailure()
             << "column " << j << ": got " << g[j] << ", expected " << w[j] << " (diff " << diff
             << ", terms' magnitude " << magnitude << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

struct Case {
  int64_t m, n, k;
  DType dtype = DType::bf16;  // operands and output
  bool ta = false, tb = false;
  std::string str() const {
    return fmt::format("{}x{}x{} {} ta={} tb={}", m, n, k, dtype_name(dtype), ta, tb);
  }
  Tensor a(uint32_t seed) const {
    return ta ? random_tensor({k, m}, seed, -1, 1, dtype)
              : random_tensor({m, k}, seed, -1, 1, dtype);
  }
  Tensor b(uint32_t seed) const {
    return tb ? random_tensor({n, k}, seed, -1, 1, dtype)
              : random_tensor({k, n}, seed, -1, 1, dtype);
  }
};

// fc1 forward: aux = x·Wᵀ + bias, c = gelu(aux).
void expect_gelu_aux_matches_cpu(const Case& cs, bool with_bias, DType bias_type) {
  SCOPED_TRACE(cs.str() + (with_bias ? fmt::format(" bias {}", dtype_name(bias_type)) : ""));
  const Tensor a = cs.a(1), b = cs.b(2), bias = random_tensor({cs.n}, 3, -1, 1, bias_type);
  // oneDNN's f32 matmul takes no bf16 bias: the CPU adds its values as f32.
  const Tensor cpu_bias = cs.dtype == DType::f32 ? bias.to(DType::f32) : bias;
  Tensor want_aux = Tensor::empty({cs.m, cs.n}, cs.dtype), want = want_aux.clone();
  GemmOptions opt{.trans_a = cs.ta,
                  .trans_b = cs.tb,
                  .bias = with_bias ? &cpu_bias : nullptr,
                  .epilogue = GemmEpilogue::gelu_aux,
                  .aux = &want_aux};
  gemm(cpu, a, b, want, opt);

  const Tensor ga = gpu(a), gb = gpu(b), gbias = gpu(bias);
  Tensor aux = gpu_context().empty({cs.m, cs.n}, cs.dtype);
  Tensor c = gpu_context().empty({cs.m, cs.n}, cs.dtype);
  opt.bias = with_bias ? &gbias : nullptr;
  opt.aux = &aux;
  const bool fused = gemm_epilogue_fused(gpu_context(), ga, gb, c, opt);
  SCOPED_TRACE(fused ? "fused" : "unfused");
  gemm(gpu_context(), ga, gb, c, opt);
  EXPECT_TRUE(close(want_aux, host(aux), product_tolerance(cs.dtype, cs.k), 1.0));
  EXPECT_TRUE(close(want, host(c), activation_tolerance(cs.dtype), 1.0));
}

// fc2's dgrad: c = (dy·W) ⊙ gelu'(pre), bias_grad += column sums of c.
void expect_dgelu_bgrad_matches_cpu(const Case& cs, bool with_grad) {
  SCOPED_TRACE(cs.str() + (with_grad ? " bias_grad" : ""));
  const Tensor a = cs.a(4), b = cs.b(5);
  const Tensor pre = random_tensor({cs.m, cs.n}, 6, -3, 3, cs.dtype);
  const Tensor grad0 = random_tensor({cs.n}, 7);
  Tensor want = Tensor::empty({cs.m, cs.n}, cs.dtype), want_grad = grad0.clone();
  Tensor aux = pre.clone();
  GemmOptions opt{.trans_a = cs.ta,
                  .trans_b = cs.tb,
                  .epilogue = GemmEpilogue::dgelu_bgrad,
                  .aux = &aux,
                  .bias_grad = with_grad ? &want_grad : nullptr};
  gemm(cpu, a, b, want, opt);

  const Tensor ga = gpu(a), gb = gpu(b);
  Tensor gaux = gpu(pre), grad = gpu(grad0);
  Tensor c = gpu_context().empty({cs.m, cs.n}, cs.dtype);
  opt.aux = &gaux;
  opt.bias_grad = with_grad ? &grad : nullptr;
  const bool fused = gemm_epilogue_fused(gpu_context(), ga, gb, c, opt);
  SCOPED_TRACE(fused ? "fused" : "unfused");
  gemm(gpu_context(), ga, gb, c, opt);
  EXPECT_TRUE(close(want, host(c), activation_tolerance(cs.dtype), 1.0));
  EXPECT_TRUE(bitwise_equal(pre, gaux));
  if (with_grad) {
    EXPECT_TRUE(sums_close(want_grad, grad, want, grad0, activation_tolerance(cs.dtype).rel));
  } else {
    EXPECT_TRUE(bitwise_equal(grad0, grad));
  }
}

// The wgrad GEMM: dW (+)= dyᵀ·x, db += Σ_rows dy.
void expect_bgrad_a_matches_cpu(DType in, DType out, bool accumulate, bool tb, int64_t tokens,
                                int64_t o, int64_t i) {
  SCOPED_TRACE(fmt::format("{}x{}x{} {}->{} acc={} tb={}", o, i, tokens, dtype_name(in),
                           dtype_name(out), accumulate, tb));
  const Tensor dy = random_tensor({tokens, o}, 8, -1, 1, in);
  const Tensor x =
      tb ? random_tensor({i, tokens}, 9, -1, 1, in) : random_tensor({tokens, i}, 9, -1, 1, in);
  const Tensor w0 = random_tensor({o, i}, 10, -1, 1, out), db0 = random_tensor({o}, 11);
  Tensor want = w0.clone(), want_db = db0.clone();
  GemmOptions opt{.trans_a = true,
                  .trans_b = tb,
                  .accumulate = accumulate,
                  .epilogue = GemmEpilogue::bgrad_a,
                  .bias_grad = &want_db};
  gemm(cpu, dy, x, want, opt);

  const Tensor gdy = gpu(dy), gx = gpu(x);
  Tensor dw = gpu(w0), db = gpu(db0);
  opt.bias_grad = &db;
  const bool fused = gemm_epilogue_fused(gpu_context(), gdy, gx, dw, opt);
  SCOPED_TRACE(fused ? "fused" : "unfused");
  gemm(gpu_context(), gdy, gx, dw, opt);
  EXPECT_TRUE(close(want, host(dw), product_tolerance(out, tokens), out == DType::bf16 ? 1.0 : 0));
  // The f32 sum of exact inputs (rounded to bf16 for a bf16 output).
  EXPECT_TRUE(sums_close(want_db, db, dy.to(DType::f32), db0, out == DType::bf16 ? 8e-3 : 1e-5));
}

TEST(CudaGemmEpilogue, GeluAuxMatchesCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::bf16, DType::f32}) {
    for (int t = 0; t < 4; ++t) {
      const Case cs{.m = 64, .n = 96, .k = 80, .dtype = dt, .ta = (t & 1) != 0, .tb = (t & 2) != 0};
      expect_gelu_aux_matches_cpu(cs, false, DType::f32);
      expect_gelu_aux_matches_cpu(cs, true, DType::f32);
      expect_gelu_aux_matches_cpu(cs, true, DType::bf16);
    }
  }
}

TEST(CudaGemmEpilogue, DgeluBgradMatchesCpu) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::bf16, DType::f32}) {
    for (int t = 0; t < 4; ++t) {
      const Case cs{.m = 72, .n = 64, .k = 96, .dtype = dt, .ta = (t & 1) != 0, .tb = (t & 2) != 0};
      expect_dgelu_bgrad_matches_cpu(cs, false);
      expect_dgelu_bgrad_matches_cpu(cs, true);
    }
  }
}

TEST(CudaGemmEpilogue, BgradAMatchesCpu) {
  WEFT_REQUIRE_GPU();
  for (DType in : {DType::bf16, DType::f32}) {
    for (DType out : {DType::f32, DType::bf16}) {
      for (bool accumulate : {false, true}) {
        for (bool tb : {false, true})
          expect_bgrad_a_matches_cpu(in, out, accumulate, tb, 80, 48, 64);
      }
    }
  }
}

// GPT-2 small's MLP at 256 tokens (C 768, H 3072), bf16: the epilogues the
// MLP and Linear take on a GPU are fused there (llm.c and Transformer Engine
// run these), and match the CPU.
TEST(CudaGemmEpilogue, Gpt2MlpShapesAreFused) {
  WEFT_REQUIRE_GPU();
  const int64_t tokens = 256, c = 768, h = 3072;
  const ExecContext& g = gpu_context();
  const Tensor x = g.empty({tokens, c}, DType::bf16), w1 = g.empty({h, c}, DType::bf16);
  const Tensor bias = g.empty({h});
  Tensor pre = g.empty({tokens, h}, DType::bf16), act = g.empty({tokens, h}, DType::bf16);
  EXPECT_TRUE(gemm_epilogue_fused(
      g, x, w1, act,
      {.trans_b = true, .bias = &bias, .epilogue = GemmEpilogue::gelu_aux, .aux = &pre}));
  const Tensor dy = g.empty({tokens, c}, DType::bf16), w2 = g.empty({c, h}, DType::bf16);
  Tensor dh = g.empty({tokens, h}, DType::bf16), db1 = g.empty({h});
  EXPECT_TRUE(gemm_epilogue_fused(
      g, dy, w2, dh, {.epilogue = GemmEpilogue::dgelu_bgrad, .aux = &pre, .bias_grad = &db1}));
  Tensor dw2 = g.empty({c, h}), db2 = g.empty({c});
  const GemmOptions wgrad{
      .trans_a = true, .accumulate = true, .epilogue = GemmEpilogue::bgrad_a, .bias_grad = &db2};
  // A bf16 wgrad output is what llm.c fuses; weft's f32 gradients are
  // reported (cuBLASLt may refuse BGRADB for them; the call then runs
  // unfused, which BgradAMatchesCpu checks either way).
  Tensor dw2_bf16 = g.empty({c, h}, DType::bf16);
  EXPECT_TRUE(gemm_epilogue_fused(g, dy, act, dw2_bf16, wgrad));
  std::cout << "bgrad_a of a bf16 product into an f32 gradient: "
            << (gemm_epilogue_fused(g, dy, act, dw2, wgrad) ? "fused" : "unfused") << "\n";
  expect_gelu_aux_matches_cpu({.m = tokens, .n = h, .k = c, .tb = true}, true, DType::f32);
  expect_dgelu_bgrad_matches_cpu({.m = tokens, .n = h, .k = c}, true);
  expect_bgrad_a_matches_cpu(DType::bf16, DType::f32, true, false, tokens, c, h);
}

// Where the epilogues' layout rules fail (aux rows not a multiple of 8
// elements, an aux buffer not 16-byte aligned) the GPU runs the unfused
// sequence, exactly the GPU's gemm and activation kernels.
TEST(CudaGemmEpilogue, RefusedLayoutsRunTheUnfusedSequence) {
  WEFT_REQUIRE_GPU();
  const ExecContext& g = gpu_context();
  const int64_t m = 33, k = 40;
  for (int64_t n : {int64_t{37}, int64_t{48}}) {
    SCOPED_TRACE(fmt::format("n = {}", n));
    const Tensor a = gpu(random_tensor({m, k}, 20, -1, 1, DType::bf16));
    const Tensor b = gpu(random_tensor({k, n}, 21, -1, 1, DType::bf16));
    const Tensor bias = gpu(random_tensor({n}, 22));
    // n = 48 fits, but the aux matrix starts one element into its buffer.
    Tensor buffer = g.empty({m * n + 1}, DType::bf16);
    Tensor aux =
        n % 8 == 0 ? buffer.narrow(1, m * n).reshape({m, n}) : g.empty({m, n}, DType::bf16);
    Tensor c = g.empty({m, n}, DType::bf16);
    GemmOptions opt{.bias = &bias, .epilogue = GemmEpilogue::gelu_aux, .aux = &aux};
    EXPECT_FALSE(gemm_epilogue_fused(g, a, b, c, opt));
    gemm(g, a, b, c, opt);
    Tensor want_aux = g.empty({m, n}, DType::bf16), want = g.empty({m, n}, DType::bf16);
    gemm(g, a, b, want_aux, {.bias = &bias});
    gelu_forward(g, want_aux, want);
    EXPECT_TRUE(bitwise_equal(want_aux, aux));
    EXPECT_TRUE(bitwise_equal(want, c));

    Tensor grad = gpu(random_tensor({n}, 23)), want_grad = grad.clone();
    Tensor dc = g.empty({m, n}, DType::bf16);
    opt = {.epilogue = GemmEpilogue::dgelu_bgrad, .aux = &aux, .bias_grad = &grad};
    EXPECT_FALSE(gemm_epilogue_fused(g, a, b, dc, opt));
    gemm(g, a, b, dc, opt);
    Tensor want_dc = g.empty({m, n}, DType::bf16);
    gemm(g, a, b, want_dc);
    gelu_backward(g, want_dc, aux, want_dc);
    bias_backward(g, want_dc, want_grad);
    EXPECT_TRUE(bitwise_equal(want_dc, dc));
    EXPECT_TRUE(bitwise_equal(want_grad, grad));
  }
}

// An f32 product for a bf16 output (f32 inputs) is never fused, and runs as
// the sequence.
TEST(CudaGemmEpilogue, F32InputsOfABf16OutputRunUnfused) {
  WEFT_REQUIRE_GPU();
  const ExecContext& g = gpu_context();
  const Tensor a = gpu(random_tensor({16, 32}, 30)), b = gpu(random_tensor({32, 24}, 31));
  Tensor aux = g.empty({16, 24}, DType::bf16), c = g.empty({16, 24}, DType::bf16);
  const GemmOptions opt{.epilogue = GemmEpilogue::gelu_aux, .aux = &aux};
  EXPECT_FALSE(gemm_epilogue_fused(g, a, b, c, opt));
  gemm(g, a, b, c, opt);
  Tensor want_aux = g.empty({16, 24}, DType::bf16), want = g.empty({16, 24}, DType::bf16);
  gemm(g, a, b, want_aux);
  gelu_forward(g, want_aux, want);
  EXPECT_TRUE(bitwise_equal(want_aux, aux));
  EXPECT_TRUE(bitwise_equal(want, c));
}

#if WEFT_HAVE_CUDA  // the cuda plan count is compiled only in CUDA builds
// Repeated calls of one shape and epilogue build nothing new, and the query
// shares the call's plan.
TEST(CudaGemmEpilogue, SteadyStateCreatesNothing) {
  WEFT_REQUIRE_GPU();
  const ExecContext& g = gpu_context();
  const Tensor a = gpu(random_tensor({64, 96}, 40, -1, 1, DType::bf16));
  const Tensor b = gpu(random_tensor({128, 96}, 41, -1, 1, DType::bf16));
  const Tensor bias = gpu(random_tensor({128}, 42));
  Tensor aux = g.empty({64, 128}, DType::bf16), c = g.empty({64, 128}, DType::bf16);
  const GemmOptions opt{
      .trans_b = true, .bias = &bias, .epilogue = GemmEpilogue::gelu_aux, .aux = &aux};
  gemm(g, a, b, c, opt);
  const int64_t plans = impl::plans_created<Backend::cuda>();
  for (int i = 0; i < 3; ++i) {
    (void)gemm_epilogue_fused(g, a, b, c, opt);
    gemm(g, a, b, c, opt);
  }
  EXPECT_EQ(impl::plans_created<Backend::cuda>(), plans);
}
#endif

}  // namespace
}  // namespace weft::kernels
