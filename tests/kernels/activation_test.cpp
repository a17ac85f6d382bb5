#include "weft/kernels/activation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>

#include "testing.h"
#include "weft/core/threads.h"

namespace weft::kernels {
namespace {

// The host context: the calling thread's CPU threads.
const ExecContext& ec = ExecContext::host();

using weft::testing::close;
using weft::testing::finite_difference;
using weft::testing::kBF16;
using weft::testing::kF32;
using weft::testing::random_tensor;
using weft::testing::weighted_sum;

double gelu_ref(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

TEST(Gelu, ForwardMatchesGpt2TanhFormula) {
  Tensor x = random_tensor({1000}, 1, -6, 6);
  Tensor y = Tensor::empty({1000});
  gelu_forward(ec, x, y);
  std::vector<double> ref;
  for (float v : x.to_vector()) ref.push_back(gelu_ref(v));
  EXPECT_TRUE(close(ref, y.to_vector(), {1e-5, 1e-6}));
}

TEST(Gelu, BackwardMatchesFiniteDifferences) {
  Tensor x = random_tensor({64}, 2, -4, 4), w = random_tensor({64}, 3);
  auto loss = [&] {
    Tensor y = Tensor::empty({64});
    gelu_forward(ec, x, y);
    return weighted_sum(y, w);
  };
  Tensor dx = Tensor::empty({64});
  gelu_backward(ec, w, x, dx);
  EXPECT_TRUE(close(finite_difference(x, loss), dx.to_vector(), {2e-3, 2e-3}));
}

TEST(Gelu, Bf16WithinTolerance) {
  Tensor x = random_tensor({512}, 4, -4, 4, DType::bf16);
  Tensor y = Tensor::empty({512}, DType::bf16);
  gelu_forward(ec, x, y);
  std::vector<double> ref;
  for (float v : x.to_vector()) ref.push_back(gelu_ref(v));
  EXPECT_TRUE(close(ref, y.to_vector(), kBF16, 1e-2));
}

// The primitive cache is keyed by (elements, dtype, threads): an f32 call at
// 257 threads once found the bf16 primitive made at 1 thread (a packed key).
TEST(Gelu, CacheKeepsDtypesApartAtAnyThreadCount) {
  Tensor xb = random_tensor({64}, 7, -4, 4, DType::bf16), yb = Tensor::empty({64}, DType::bf16);
  set_num_threads(1);
  gelu_forward(ec, xb, yb);
  Tensor x = random_tensor({64}, 8, -4, 4), y = Tensor::empty({64});
  set_num_threads(257);
  gelu_forward(ec, x, y);
  set_num_threads(0);
  std::vector<double> ref;
  for (float v : x.to_vector()) ref.push_back(gelu_ref(v));
  EXPECT_TRUE(close(ref, y.to_vector(), {1e-5, 1e-6}));
}

TEST(Bias, AddAndGradient) {
  const int64_t n = 130, c = 9;
  Tensor y = random_tensor({n, c}, 5), b = random_tensor({c}, 6);
  std::vector<float> before = y.to_vector(), bv = b.to_vector();
  bias_add(ec, y, b);
  std::vector<float> after = y.to_vector();
  for (int64_t i = 0; i < n * c; ++i)
    EXPECT_FLOAT_EQ(after[static_cast<size_t>(i)],
                    before[static_cast<size_t>(i)] + bv[static_cast<size_t>(i % c)]);
  // d/db Σ w⊙(y + b) = Σ_rows w; backward accumulates.
  Tensor w = random_tensor({n, c}, 7), db = Tensor::full({c}, 1.0f);
  bias_backward(ec, w, db);
  std::vector<float> wv = w.to_vector();
  std::vector<double> ref(static_cast<size_t>(c), 1.0);
  for (int64_t i = 0; i < n * c; ++i) ref[static_cast<size_t>(i % c)] += wv[static_cast<size_t>(i)];
  EXPECT_TRUE(close(ref, db.to_vector(), kF32, 1.0));
}

TEST(Bias, GradientIsThreadCountInvariant) {
  Tensor dy = random_tensor({1000, 33}, 8);
  std::vector<std::vector<float>> out;
  for (int t : {1, 2}) {
    set_num_threads(t);
    Tensor db = Tensor::zeros({33});
    bias_backward(ec, dy, db);
    out.push_back(db.to_vector());
  }
  set_num_threads(0);
  EXPECT_EQ(out[0], out[1]);
}

TEST(Elementwise, AddAxpyScale) {
  Tensor a = random_tensor({50}, 9), b = random_tensor({50}, 10), out = Tensor::empty({50});
  add(ec, a, b, out);
  std::vector<float> av = a.to_vector(), bv = b.to_vector();
  for (size_t i = 0; i < 50; ++i) EXPECT_EQ(out.to_vector()[i], av[i] + bv[i]);
  axpy(ec, 2.0f, a, b);
  for (size_t i = 0; i < 50; ++i) EXPECT_FLOAT_EQ(b.to_vector()[i], bv[i] + 2 * av[i]);
  scale(ec, a, -0.5f);
  for (size_t i = 0; i < 50; ++i) EXPECT_EQ(a.to_vector()[i], av[i] * -0.5f);
  Tensor wrong = Tensor::zeros({49});
  EXPECT_THROW(add(ec, a, wrong, out), Error);
  Tensor i32 = Tensor::zeros({50}, DType::i32);
  EXPECT_THROW(add(ec, a, i32, out), Error);
}

// convert: bit for bit Tensor::copy_from's conversion, f32 -> bf16 (ties
// to even, NaNs kept NaN, infinities, subnormals, values that round up to
// infinity) and back, over more elements than one parallel chunk, at one
// thread and at all.
TEST(Elementwise, ConvertIsCopyFromBitForBit) {
  const int64_t n = (int64_t{1} << 16) + 37;
  Tensor f = random_tensor({n}, 11, -3, 3);
  const uint32_t special[] = {0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7f800000u, 0xff800000u,
                              0x00000001u, 0x80400000u, 0x3f808000u, 0x3f818000u, 0x7f7fffffu,
                              0x3f80ffffu, 0x00000000u, 0x80000000u};
  for (size_t i = 0; i < std::size(special); ++i) {
    f.data<float>()[i * 997] = bits_to_f32(special[i]);
  }
  for (const int threads : {1, 0}) {
    set_num_threads(threads);
    Tensor want = Tensor::empty({n}, DType::bf16), got = Tensor::empty({n}, DType::bf16);
    want.copy_from(f);
    convert(ec, f, got);
    EXPECT_EQ(std::memcmp(want.raw(), got.raw(), static_cast<size_t>(want.nbytes())), 0);
    Tensor back_want = Tensor::empty({n}), back_got = Tensor::empty({n});
    back_want.copy_from(got);
    convert(ec, got, back_got);
    EXPECT_EQ(std::memcmp(back_want.raw(), back_got.raw(), static_cast<size_t>(n * 4)), 0);
  }
  set_num_threads(0);
  Tensor wrong = Tensor::empty({n - 1}, DType::bf16);
  EXPECT_THROW(convert(ec, f, wrong), Error);
}

}  // namespace
}  // namespace weft::kernels
