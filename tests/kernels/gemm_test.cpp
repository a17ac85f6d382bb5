#include "weft/kernels/gemm.h"

#include <gtest/gtest.h>

#include <thread>

#include "testing.h"
#include "weft/core/threads.h"
#include "weft/kernels/cpu_support.h"

namespace weft::kernels {
namespace {

// The host context: the calling thread's CPU threads.
const ExecContext& ec = ExecContext::host();

using weft::testing::close;
using weft::testing::kBF16;
using weft::testing::kF32;
using weft::testing::random_tensor;

// fp64 reference: c = alpha * op(a)·op(b) (+ bias) (+ c0)
std::vector<double> reference(const Tensor& a, const Tensor& b, int64_t m, int64_t n, int64_t k,
                              bool ta, bool tb, double alpha = 1, const Tensor* bias = nullptr,
                              const Tensor* c0 = nullptr) {
  std::vector<float> av = a.to_vector(), bv = b.to_vector();
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        double x = ta ? av[static_cast<size_t>(p * m + i)] : av[static_cast<size_t>(i * k + p)];
        double y = tb ? bv[static_cast<size_t>(j * k + p)] : bv[static_cast<size_t>(p * n + j)];
        s += x * y;
      }
      s *= alpha;
      if (bias) s += bias->item(j);
      if (c0) s += c0->item(i * n + j);
      c[static_cast<size_t>(i * n + j)] = s;
    }
  }
  return c;
}

struct GemmCase {
  bool ta, tb;
};

class GemmTranspose : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmTranspose, MatchesFp64Reference) {
  const auto [ta, tb] = GetParam();
  const int64_t m = 37, n = 29, k = 53;
  Tensor a = ta ? random_tensor({k, m}, 1) : random_tensor({m, k}, 1);
  Tensor b = tb ? random_tensor({n, k}, 2) : random_tensor({k, n}, 2);
  Tensor c = Tensor::empty({m, n});
  gemm(ec, a, b, c, {.trans_a = ta, .trans_b = tb});
  EXPECT_TRUE(close(reference(a, b, m, n, k, ta, tb), c.to_vector(), kF32, 1.0));
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, GemmTranspose,
                         ::testing::Values(GemmCase{false, false}, GemmCase{false, true},
                                           GemmCase{true, false}, GemmCase{true, true}));

TEST(Gemm, AccumulateAlphaAndBias) {
  const int64_t m = 16, n = 24, k = 40;
  Tensor a = random_tensor({m, k}, 3), b = random_tensor({n, k}, 4);
  Tensor bias = random_tensor({n}, 5);
  Tensor c = random_tensor({m, n}, 6);
  Tensor c0 = c.clone();
  gemm(ec, a, b, c, {.trans_b = true, .accumulate = true, .alpha = 0.5f});
  EXPECT_TRUE(
      close(reference(a, b, m, n, k, false, true, 0.5, nullptr, &c0), c.to_vector(), kF32, 1.0));
  Tensor d = Tensor::empty({m, n});
  gemm(ec, a, b, d, {.trans_b = true, .bias = &bias});
  EXPECT_TRUE(close(reference(a, b, m, n, k, false, true, 1, &bias), d.to_vector(), kF32, 1.0));
}

TEST(Gemm, Bf16InputsAccumulateInF32) {
  const int64_t m = 33, n = 65, k = 128;
  Tensor a = random_tensor({m, k}, 7, -1, 1, DType::bf16);
  Tensor b = random_tensor({n, k}, 8, -1, 1, DType::bf16);
  // The reference sees the same bf16-rounded inputs, so an f32 output must
  // agree to f32 accuracy: the products accumulate in f32, not bf16.
  Tensor c = Tensor::empty({m, n}, DType::f32);
  gemm(ec, a, b, c, {.trans_b = true});
  EXPECT_TRUE(close(reference(a, b, m, n, k, false, true), c.to_vector(), {1e-5, 1e-5}, 1.0));
  Tensor cb = Tensor::empty({m, n}, DType::bf16);
  gemm(ec, a, b, cb, {.trans_b = true});
  EXPECT_TRUE(close(reference(a, b, m, n, k, false, true), cb.to_vector(), kBF16, 1.0));
}

// Where oneDNN has no bf16 matmul (capped to AVX2, or a CPU without
// AVX-512), bf16 GEMMs widen their operands to f32 and run the f32 kernel:
// then the result is bitwise the f32 GEMM of the same values, rounded to bf16
// once. With native bf16 kernels only the order of the f32 sums may differ.
TEST(Gemm, Bf16IsTheF32ProductOfBf16ValuesRoundedOnce) {
  const int64_t m = 19, n = 40, k = 72;
  Tensor a = random_tensor({k, m}, 21, -1, 1, DType::bf16);  // read transposed
  Tensor b = random_tensor({n, k}, 22, -1, 1, DType::bf16);
  Tensor bias = random_tensor({n}, 23, -1, 1, DType::bf16);
  Tensor c = random_tensor({m, n}, 24, -1, 1, DType::bf16);
  Tensor c_f32 = c.to(DType::f32);
  const GemmOptions opt{
      .trans_a = true, .trans_b = true, .accumulate = true, .alpha = 0.75f, .bias = &bias};
  gemm(ec, a, b, c, opt);
  Tensor bias_f32 = bias.to(DType::f32);
  GemmOptions opt_f32 = opt;
  opt_f32.bias = &bias_f32;
  gemm(ec, a.to(DType::f32), b.to(DType::f32), c_f32, opt_f32);
  const std::vector<float> got = c.to_vector(), want = c_f32.to(DType::bf16).to_vector();
  if (cpu_support().native_bf16) {
    EXPECT_TRUE(close(std::vector<double>(want.begin(), want.end()), got, kBF16, 1.0));
  } else {
    EXPECT_EQ(got, want);
  }
}

// The same for strided batched operands (attention heads inside a wider
// row, one operand transposed through its strides).
TEST(Gemm, Bf16BatchedStridedMatchesF32OfBf16Values) {
  const int64_t batch = 3, rows = 5, inner = 8, cols = 6, width = 32;
  Tensor q = random_tensor({batch, rows, width}, 31, -1, 1, DType::bf16);
  Tensor kt = random_tensor({batch, cols, width}, 32, -1, 1, DType::bf16);
  auto view = [&](const Tensor& t, int64_t r, int64_t cl, bool transposed) {
    StridedMatrices s;
    s.data = t.raw();
    s.dtype = t.dtype();
    s.batch[0] = batch;
    s.batch_stride[0] = t.shape().last() * (transposed ? cl : r);
    s.rows = r;
    s.cols = cl;
    s.row_stride = transposed ? 1 : t.shape().last();
    s.col_stride = transposed ? t.shape().last() : 1;
    return s;
  };
  // out (batch, rows, cols) = q[:, :, :inner] · k[:, :, :inner]ᵀ
  auto product = [&](const Tensor& qq, const Tensor& kk, DType out) {
    Tensor c = Tensor::zeros({batch, rows, cols}, out);
    StridedMatrices sc = view(c, rows, cols, false);
    batched_gemm(ec, view(qq, rows, inner, false), view(kk, inner, cols, true), sc, 0.5f);
    return c;
  };
  const std::vector<float> got = product(q, kt, DType::bf16).to_vector();
  const std::vector<float> want =
      product(q.to(DType::f32), kt.to(DType::f32), DType::f32).to(DType::bf16).to_vector();
  if (cpu_support().native_bf16) {
    EXPECT_TRUE(close(std::vector<double>(want.begin(), want.end()), got, kBF16, 1.0));
  } else {
    EXPECT_EQ(got, want);
  }
}

TEST(Gemm, HigherRankTensorsAreViewedAsRows) {
  Tensor x = random_tensor({2, 3, 8}, 9);  // (B, T, C)
  Tensor w = random_tensor({5, 8}, 10);    // (out, in)
  Tensor y = Tensor::empty({2, 3, 5});
  gemm(ec, x, w, y, {.trans_b = true});
  EXPECT_TRUE(close(reference(x, w, 6, 5, 8, false, true), y.to_vector(), kF32, 1.0));
}

TEST(Gemm, BackwardIdentitiesMatchFiniteDifferences) {
  // y = x·Wᵀ; L = Σ g⊙y; dx = g·W, dW = gᵀ·x.
  const int64_t t = 6, in = 5, out = 4;
  Tensor x = random_tensor({t, in}, 11), w = random_tensor({out, in}, 12);
  Tensor g = random_tensor({t, out}, 13);
  auto loss = [&] {
    Tensor y = Tensor::empty({t, out});
    gemm(ec, x, w, y, {.trans_b = true});
    return weft::testing::weighted_sum(y, g);
  };
  Tensor dx = Tensor::empty({t, in}), dw = Tensor::zeros({out, in});
  gemm(ec, g, w, dx);
  gemm(ec, g, x, dw, {.trans_a = true, .accumulate = true});
  EXPECT_TRUE(close(weft::testing::finite_difference(x, loss), dx.to_vector(), {2e-3, 2e-3}));
  EXPECT_TRUE(close(weft::testing::finite_difference(w, loss), dw.to_vector(), {2e-3, 2e-3}));
}

TEST(Gemm, SteadyStateCreatesNothingNew) {
  Tensor a = random_tensor({64, 32}, 14), b = random_tensor({32, 48}, 15);
  Tensor c = Tensor::empty({64, 48});
  gemm(ec, a, b, c);
  const int64_t created = gemm_primitives_created();
  MemoryTracker tracker;
  ScopedMemoryTracker scope(tracker);
  for (int i = 0; i < 5; ++i) gemm(ec, a, b, c);
  EXPECT_EQ(gemm_primitives_created(), created);
  EXPECT_EQ(tracker.device(Device::cpu()).peak, 0);
  Tensor c2 = Tensor::empty({64, 48});
  gemm(ec, a, b, c2, {.accumulate = true});
  EXPECT_EQ(gemm_primitives_created(), created + 1);
}

TEST(Gemm, ConcurrentCallsFromSeveralThreads) {
  const int64_t m = 48, n = 40, k = 64;
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      set_num_threads(1);
      Tensor a = random_tensor({m, k}, 100 + static_cast<uint32_t>(r));
      Tensor b = random_tensor({k, n}, 200 + static_cast<uint32_t>(r));
      Tensor c = Tensor::empty({m, n});
      bool good = true;
      for (int it = 0; it < 20; ++it) {
        gemm(ec, a, b, c);
        good = good && close(reference(a, b, m, n, k, false, false), c.to_vector(), kF32, 1.0);
      }
      ok[static_cast<size_t>(r)] = good;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok, (std::vector<int>{1, 1, 1, 1}));
}

TEST(Gemm, ShapeMismatchIsAClearError) {
  Tensor a = Tensor::zeros({4, 5}), b = Tensor::zeros({6, 7}), c = Tensor::zeros({4, 7});
  try {
    gemm(ec, a, b, c);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("inner dimensions"), std::string::npos) << e.what();
  }
  Tensor bb = Tensor::zeros({5, 7}, DType::bf16);
  EXPECT_THROW(gemm(ec, a, bb, c), Error);
  Tensor i = Tensor::zeros({4, 5}, DType::i32);
  EXPECT_THROW(gemm(ec, i, i, c), Error);
  // The bias's dtype is checked by kernels::gemm itself, on every device.
  Tensor b57 = Tensor::zeros({5, 7}), bias = Tensor::zeros({7}, DType::f16);
  const std::string f16 = weft::testing::error_of([&] { gemm(ec, a, b57, c, {.bias = &bias}); });
  EXPECT_NE(f16.find("gemm bias must be f32 or bf16, got f16"), std::string::npos) << f16;
}

// A packed weight (pack_b) gives the plain weight's product bit for bit, in
// both directions a layer reads it (x·Wᵀ forward, dy·W dgrad), for row
// counts a grouped layer's experts get (none, one, odd, a few hundred), into
// bf16 and accumulated f32 outputs; on a CPU with native bf16 kernels the
// weight is packed, elsewhere (and under f32) products read it plain.
TEST(Gemm, PackedWeightEqualsPlainBitForBit) {
  const int64_t out = 96, in = 80;
  for (const DType dt : {DType::bf16, DType::f32}) {
    const Tensor w = random_tensor({out, in}, 31, -1, 1, dt);
    for (const bool trans_b : {true, false}) {
      SCOPED_TRACE(format("{} trans_b {}", dtype_name(dt), trans_b));
      PackedWeight p;
      pack_b(ec, w, trans_b, p);
      EXPECT_EQ(p.packed(), dt == DType::bf16 && cpu_support().native_bf16);
      EXPECT_EQ(p.k(), trans_b ? in : out);
      EXPECT_EQ(p.n(), trans_b ? out : in);
      for (const int64_t m : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{256}}) {
        const Tensor a = random_tensor({m, p.k()}, 40 + static_cast<uint32_t>(m), -1, 1, dt);
        Tensor plain = Tensor::zeros({m, p.n()}, dt), packed = Tensor::zeros({m, p.n()}, dt);
        gemm(ec, a, w, plain, {.trans_b = trans_b});
        gemm(ec, a, p, packed, {.trans_b = trans_b});
        EXPECT_EQ(packed.to_vector(), plain.to_vector()) << m << " rows";
        // wgrad-style: f32 output, accumulated, scaled.
        Tensor acc = random_tensor({m, p.n()}, 50, -1, 1, DType::f32), acc2 = acc.clone();
        gemm(ec, a, w, acc, {.trans_b = trans_b, .accumulate = true, .alpha = 0.5f});
        gemm(ec, a, p, acc2, {.trans_b = trans_b, .accumulate = true, .alpha = 0.5f});
        EXPECT_EQ(acc2.to_vector(), acc.to_vector()) << m << " rows, accumulated";
      }
    }
  }
  // Packing again into the same PackedWeight reuses its buffer.
  const Tensor w = random_tensor({out, in}, 32, -1, 1, DType::bf16);
  PackedWeight p;
  pack_b(ec, w, true, p);
  const Tensor first = p.plain();
  MemoryTracker tracker;
  {
    ScopedMemoryTracker scope(tracker);
    pack_b(ec, w, true, p);
  }
  EXPECT_EQ(tracker.device(Device::cpu()).peak, 0);
  EXPECT_TRUE(p.plain().same_storage(first));
  Tensor a = random_tensor({4, in}, 33, -1, 1, DType::bf16),
         c = Tensor::zeros({4, out}, DType::bf16);
  EXPECT_THROW(gemm(ec, a, p, c, {.trans_b = false}), Error);
}

TEST(BatchedGemm, HeadsInsidePackedBuffer) {
  // qkv (B,T,3C) with H heads of D: scores[b,h] = q[b,:,h] · k[b,:,h]ᵀ, no copies.
  const int64_t B = 2, T = 5, H = 3, D = 4, C = H * D;
  Tensor qkv = random_tensor({B, T, 3 * C}, 16);
  Tensor scores = Tensor::empty({B, H, T, T});
  float* base = qkv.data<float>();
  StridedMatrices q{.data = base,
                    .batch = {B, H},
                    .batch_stride = {T * 3 * C, D},
                    .rows = T,
                    .cols = D,
                    .row_stride = 3 * C,
                    .col_stride = 1};
  // kᵀ: (D, T) read from k's (T, D) storage.
  StridedMatrices kt{.data = base + C,
                     .batch = {B, H},
                     .batch_stride = {T * 3 * C, D},
                     .rows = D,
                     .cols = T,
                     .row_stride = 1,
                     .col_stride = 3 * C};
  StridedMatrices s{.data = scores.raw(),
                    .batch = {B, H},
                    .batch_stride = {H * T * T, T * T},
                    .rows = T,
                    .cols = T,
                    .row_stride = T,
                    .col_stride = 1};
  batched_gemm(ec, q, kt, s, 0.5f);
  std::vector<float> v = qkv.to_vector(), got = scores.to_vector();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          double ref = 0;
          for (int64_t d = 0; d < D; ++d)
            ref += static_cast<double>(v[static_cast<size_t>((b * T + i) * 3 * C + h * D + d)]) *
                   v[static_cast<size_t>((b * T + j) * 3 * C + C + h * D + d)];
          EXPECT_NEAR(got[static_cast<size_t>(((b * H + h) * T + i) * T + j)], 0.5 * ref, 1e-5);
        }
}

}  // namespace
}  // namespace weft::kernels
