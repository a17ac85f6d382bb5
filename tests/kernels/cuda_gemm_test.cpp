// The cuBLASLt GEMMs against the CPU's on the same inputs.
//
// Tolerances: an f32 output differs from the CPU's only by the order of the
// f32 sums over k (both accumulate in f32 from exact products), so it must
// agree within rel 1e-5 or abs 1e-5·sqrt(k) (a sum of k terms of size ~1 has
// rounding errors of that order, which the relative limit misses where terms
// cancel). A bf16 output is that value rounded once: kBF16, relative to
// max(|value|, 1) as the CPU tests do.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda_testing.h"
#include "testing.h"
#include "weft/kernels/gemm.h"
#include "weft/kernels/impl/gemm.h"

namespace weft::kernels {
namespace {

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

Tolerance tolerance(DType out, int64_t k) {
  if (out == DType::bf16) return kBF16;
  return {1e-5, 1e-5 * std::sqrt(static_cast<double>(k))};
}

double scale(DType out) { return out == DType::bf16 ? 1.0 : 0.0; }

struct Case {
  int64_t m, n, k;
  DType in = DType::f32, out = DType::f32;
  bool ta = false, tb = false, accumulate = false;
  float alpha = 1.0f;
  bool bias = false;
  DType bias_type = DType::f32;

  std::string str() const {
    return fmt::format("{}x{}x{} {}->{} ta={} tb={} acc={} alpha={} bias={}", m, n, k,
                       dtype_name(in), dtype_name(out), ta, tb, accumulate, alpha,
                       bias ? std::string(dtype_name(bias_type)) : "none");
  }
};

// Runs the case on the CPU and on the GPU from the same inputs and compares.
// The CPU reference writes f32 (oneDNN's f32 matmul has no bf16 output where
// it has native bf16 kernels) and gets no bias: the bias is added to its
// product here, as gemm.h defines, c = alpha·a·b + bias (+ c). (The CPU's
// oneDNN output scale applies after its bias: alpha·(a·b + bias).)
void expect_matches_cpu(const Case& cs, uint32_t seed = 1) {
  SCOPED_TRACE(cs.str());
  const Tensor a = cs.ta ? random_tensor({cs.k, cs.m}, seed, -1, 1, cs.in)
                         : random_tensor({cs.m, cs.k}, seed, -1, 1, cs.in);
  const Tensor b = cs.tb ? random_tensor({cs.n, cs.k}, seed + 1, -1, 1, cs.in)
                         : random_tensor({cs.k, cs.n}, seed + 1, -1, 1, cs.in);
  const Tensor c0 = random_tensor({cs.m, cs.n}, seed + 2, -1, 1, cs.out);
  const Tensor bias = cs.bias ? random_tensor({cs.n}, seed + 3, -1, 1, cs.bias_type) : Tensor();

  Tensor want = c0.to(DType::f32).clone();
  GemmOptions opt{
      .trans_a = cs.ta, .trans_b = cs.tb, .accumulate = cs.accumulate, .alpha = cs.alpha};
  gemm(ExecContext::host(), a, b, want, opt);
  if (cs.bias) {
    const std::vector<float> bv = bias.to_vector();
    float* w = want.data<float>();
    for (int64_t i = 0; i < cs.m; ++i) {
      for (int64_t j = 0; j < cs.n; ++j) w[i * cs.n + j] += bv[static_cast<size_t>(j)];
    }
  }

  const Tensor ga = gpu(a), gb = gpu(b), gbias = cs.bias ? gpu(bias) : Tensor();
  Tensor gc = gpu(c0);
  opt.bias = cs.bias ? &gbias : nullptr;
  gemm(gpu_context(), ga, gb, gc, opt);
  EXPECT_TRUE(close(want, host(gc), tolerance(cs.out, cs.k), scale(cs.out)));
}

TEST(CudaGemm, EveryTypeLayoutAndOptionMatchesCpu) {
  WEFT_REQUIRE_GPU();
  for (DType in : {DType::f32, DType::bf16}) {
    for (DType out : {DType::f32, DType::bf16}) {
      for (int flags = 0; flags < 32; ++flags) {
        Case cs{.m = 37, .n = 29, .k = 53, .in = in, .out = out};
        cs.ta = flags & 1;
        cs.tb = flags & 2;
        cs.accumulate = flags & 4;
        cs.alpha = flags & 8 ? 0.75f : 1.0f;
        cs.bias = flags & 16;
        expect_matches_cpu(cs);
      }
    }
  }
}

// The bias epilogue takes a bias of the output's type: an f32 bias on a bf16
// output is rounded to bf16 and goes to the epilogue; a bf16 bias on an f32
// output is added with a kernel after the product.
TEST(CudaGemm, BiasOfEitherTypeOnEitherOutput) {
  WEFT_REQUIRE_GPU();
  for (DType in : {DType::f32, DType::bf16}) {
    for (DType out : {DType::f32, DType::bf16}) {
      for (DType bias : {DType::f32, DType::bf16}) {
        expect_matches_cpu({.m = 40,
                            .n = 72,
                            .k = 64,
                            .in = in,
                            .out = out,
                            .tb = true,
                            .accumulate = true,
                            .alpha = 0.5f,
                            .bias = true,
                            .bias_type = bias});
      }
    }
  }
}

// A bias that is not 16-byte aligned (a view one element into a buffer)
// cannot go to the epilogue.
TEST(CudaGemm, MisalignedBias) {
  WEFT_REQUIRE_GPU();
  const int64_t m = 9, n = 33, k = 17;
  const Tensor a = random_tensor({m, k}, 41), b = random_tensor({n, k}, 42);
  const Tensor buffer = random_tensor({n + 1}, 43);
  const Tensor bias = buffer.narrow(1, n);
  Tensor want = Tensor::empty({m, n});
  gemm(ExecContext::host(), a, b, want, {.trans_b = true, .bias = &bias});
  const Tensor gbuffer = gpu(buffer);
  const Tensor gbias = gbuffer.narrow(1, n);
  Tensor got = gpu_context().empty({m, n});
  gemm(gpu_context(), gpu(a), gpu(b), got, {.trans_b = true, .bias = &gbias});
  EXPECT_TRUE(close(want, host(got), tolerance(DType::f32, k)));
}

TEST(CudaGemm, OddAndDegenerateShapes) {
  WEFT_REQUIRE_GPU();
  for (DType in : {DType::f32, DType::bf16}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        expect_matches_cpu({.m = 1, .n = 300, .k = 64, .in = in, .out = in, .ta = ta, .tb = tb});
        expect_matches_cpu({.m = 300, .n = 1, .k = 64, .in = in, .out = in, .ta = ta, .tb = tb});
        expect_matches_cpu({.m = 13, .n = 7, .k = 1, .in = in, .out = in, .ta = ta, .tb = tb});
        expect_matches_cpu({.m = 1, .n = 1, .k = 5, .in = in, .out = in, .ta = ta, .tb = tb});
      }
    }
  }
}

// The GEMMs of a GPT-2-small qkv layer over 512 tokens: forward (x·Wᵀ, with
// bias), dgrad (dy·W) and wgrad (dW += dyᵀ·x into an f32 gradient).
TEST(CudaGemm, Gpt2QkvShapes) {
  WEFT_REQUIRE_GPU();
  const int64_t tokens = 512, c = 768, out = 2304;
  for (DType in : {DType::f32, DType::bf16}) {
    expect_matches_cpu(
        {.m = tokens, .n = out, .k = c, .in = in, .out = in, .tb = true, .bias = true}, 5);
    expect_matches_cpu({.m = tokens, .n = c, .k = out, .in = in, .out = in}, 6);
    expect_matches_cpu({.m = out,
                        .n = c,
                        .k = tokens,
                        .in = in,
                        .out = DType::f32,
                        .ta = true,
                        .accumulate = true},
                       7);
  }
}

// Tensors of rank > 2 are viewed as (rows, last dim).
TEST(CudaGemm, Rank3IsRowsByLastDim) {
  WEFT_REQUIRE_GPU();
  const Tensor x = random_tensor({2, 5, 12}, 51), w = random_tensor({7, 12}, 52);
  Tensor want = Tensor::empty({2, 5, 7});
  gemm(ExecContext::host(), x, w, want, {.trans_b = true});
  Tensor got = gpu_context().empty({2, 5, 7});
  gemm(gpu_context(), gpu(x), gpu(w), got, {.trans_b = true});
  EXPECT_TRUE(close(want, host(got), tolerance(DType::f32, 12)));
}

// Attention heads multiplied in place: q·kᵀ and p·v with q, k, v heads inside
// a (B, T, 3C) buffer, the scores (B, H, T, T) dense, the output heads
// written into a (B, T, C) buffer.
struct Attention {
  static constexpr int64_t B = 2, H = 3, T = 17, D = 8, C = H * D;

  // Head matrices at element `offset` of a buffer whose rows are `width`
  // wide and whose batch entries are `batch_stride` apart; transposed reads
  // the (rows x cols) matrix from (cols x rows) storage.
  static StridedMatrices heads(const Tensor& t, int64_t offset, int64_t width, int64_t rows,
                               int64_t cols, bool transposed) {
    StridedMatrices s;
    s.data = static_cast<char*>(t.raw()) + offset * dtype_storage_bytes(t.dtype(), 1);
    s.dtype = t.dtype();
    s.batch[0] = B;
    s.batch[1] = H;
    s.batch_stride[0] = T * width;
    s.batch_stride[1] = D;
    s.rows = rows;
    s.cols = cols;
    s.row_stride = transposed ? 1 : width;
    s.col_stride = transposed ? width : 1;
    return s;
  }
  static StridedMatrices scores(const Tensor& t) {
    StridedMatrices s;
    s.data = t.raw();
    s.dtype = t.dtype();
    s.batch[0] = B;
    s.batch[1] = H;
    s.batch_stride[0] = H * T * T;
    s.batch_stride[1] = T * T;
    s.rows = T;
    s.cols = T;
    s.row_stride = T;
    return s;
  }

  // s = alpha · q·kᵀ; out += p·v.
  static void run(const ExecContext& ec, const Tensor& qkv, Tensor& s, const Tensor& p,
                  Tensor& out) {
    batched_gemm(ec, heads(qkv, 0, 3 * C, T, D, false), heads(qkv, C, 3 * C, D, T, true), scores(s),
                 0.35f);
    batched_gemm(ec, scores(p), heads(qkv, 2 * C, 3 * C, T, D, false),
                 heads(out, 0, C, T, D, false), 1.0f, true);
  }
};

TEST(CudaGemm, BatchedAttentionHeadsMatchCpu) {
  WEFT_REQUIRE_GPU();
  using A = Attention;
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor qkv = random_tensor({A::B, A::T, 3 * A::C}, 61, -1, 1, dt);
    const Tensor p = random_tensor({A::B, A::H, A::T, A::T}, 62, 0, 1, dt);
    const Tensor out0 = random_tensor({A::B, A::T, A::C}, 63, -1, 1, dt);
    Tensor s = Tensor::zeros({A::B, A::H, A::T, A::T}, dt), out = out0.clone();
    A::run(ExecContext::host(), qkv, s, p, out);

    Tensor gs = gpu_context().zeros({A::B, A::H, A::T, A::T}, dt), gout = gpu(out0);
    A::run(gpu_context(), gpu(qkv), gs, gpu(p), gout);
    EXPECT_TRUE(close(s, host(gs), tolerance(dt, A::D), scale(dt)));
    EXPECT_TRUE(close(out, host(gout), tolerance(dt, A::T), scale(dt)));
  }
}

// One batch dimension only (batch[1] = 1): a single strided cuBLASLt batch.
TEST(CudaGemm, BatchedSingleBatchDimension) {
  WEFT_REQUIRE_GPU();
  const int64_t batch = 4, m = 6, k = 10, n = 5;
  const Tensor a = random_tensor({batch, m, k}, 71), b = random_tensor({batch, k, n}, 72);
  auto dense = [&](const Tensor& t, int64_t rows, int64_t cols) {
    StridedMatrices s;
    s.data = t.raw();
    s.dtype = t.dtype();
    s.batch[0] = batch;
    s.batch_stride[0] = rows * cols;
    s.rows = rows;
    s.cols = cols;
    s.row_stride = cols;
    return s;
  };
  Tensor want = Tensor::zeros({batch, m, n});
  batched_gemm(ExecContext::host(), dense(a, m, k), dense(b, k, n), dense(want, m, n));
  const Tensor ga = gpu(a), gb = gpu(b);
  Tensor got = gpu_context().zeros({batch, m, n});
  batched_gemm(gpu_context(), dense(ga, m, k), dense(gb, k, n), dense(got, m, n));
  EXPECT_TRUE(close(want, host(got), tolerance(DType::f32, k)));
}

#if WEFT_HAVE_CUDA  // the cuda plan count is compiled only in CUDA builds
// Repeated calls of one shape reuse their plan and their workspace.
TEST(CudaGemm, SteadyStateCreatesAndAllocatesNothing) {
  WEFT_REQUIRE_GPU();
  const ExecContext& ec = gpu_context();
  const int64_t m = 256, n = 768, k = 2304;
  Tensor a = ec.empty({m, k}, DType::bf16), b = ec.empty({n, k}, DType::bf16);
  const Tensor bias = ec.zeros({n});
  Tensor c = ec.empty({m, n}, DType::bf16);
  a.fill(0.5f);
  b.fill(0.25f);
  const GemmOptions opt{.trans_b = true, .bias = &bias};
  using A = Attention;
  const Tensor qkv = ec.zeros({A::B, A::T, 3 * A::C}), p = ec.zeros({A::B, A::H, A::T, A::T});
  Tensor s = ec.zeros({A::B, A::H, A::T, A::T}), out = ec.zeros({A::B, A::T, A::C});
  auto step = [&] {
    gemm(ec, a, b, c, opt);
    A::run(ec, qkv, s, p, out);
  };
  step();
  ec.synchronize();
  const int64_t plans = impl::plans_created<Backend::cuda>();
  const int64_t allocations = weft::cuda::allocator_stats(Device::cuda(0)).driver_allocations;
  for (int i = 0; i < 10; ++i) step();
  ec.synchronize();
  EXPECT_EQ(impl::plans_created<Backend::cuda>(), plans);
  EXPECT_EQ(weft::cuda::allocator_stats(Device::cuda(0)).driver_allocations, allocations);
  EXPECT_EQ(c.item(0), 0.5f * 0.25f * static_cast<float>(k));
}
#endif

}  // namespace
}  // namespace weft::kernels
