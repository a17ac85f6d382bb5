#include "weft/kernels/norm.h"

#include <gtest/gtest.h>

#include <cmath>

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

constexpr float kEps = 1e-5f;

// fp64 references.
std::vector<double> layer_norm_ref(const Tensor& x, const Tensor& g, const Tensor& b) {
  const int64_t n = x.shape().rows(), c = x.shape().last();
  std::vector<float> xv = x.to_vector(), gv = g.to_vector(), bv = b.to_vector();
  std::vector<double> y(xv.size());
  for (int64_t r = 0; r < n; ++r) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < c; ++j) m += xv[static_cast<size_t>(r * c + j)];
    m /= static_cast<double>(c);
    for (int64_t j = 0; j < c; ++j) v += std::pow(xv[static_cast<size_t>(r * c + j)] - m, 2);
    double s = 1 / std::sqrt(v / static_cast<double>(c) + kEps);
    for (int64_t j = 0; j < c; ++j) {
      size_t i = static_cast<size_t>(r * c + j);
      y[i] = (xv[i] - m) * s * gv[static_cast<size_t>(j)] + bv[static_cast<size_t>(j)];
    }
  }
  return y;
}

std::vector<double> rms_norm_ref(const Tensor& x, const Tensor& g) {
  const int64_t n = x.shape().rows(), c = x.shape().last();
  std::vector<float> xv = x.to_vector(), gv = g.to_vector();
  std::vector<double> y(xv.size());
  for (int64_t r = 0; r < n; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < c; ++j) ss += std::pow(xv[static_cast<size_t>(r * c + j)], 2);
    double s = 1 / std::sqrt(ss / static_cast<double>(c) + kEps);
    for (int64_t j = 0; j < c; ++j) {
      size_t i = static_cast<size_t>(r * c + j);
      y[i] = xv[i] * s * gv[static_cast<size_t>(j)];
    }
  }
  return y;
}

TEST(LayerNorm, ForwardMatchesFp64) {
  Tensor x = random_tensor({3, 7, 33}, 1, -2, 3);
  Tensor g = random_tensor({33}, 2), b = random_tensor({33}, 3);
  Tensor y = Tensor::empty(x.shape()), mean = Tensor::empty({21}), rstd = Tensor::empty({21});
  layer_norm_forward(ec, x, g, b, kEps, y, mean, rstd);
  EXPECT_TRUE(close(layer_norm_ref(x, g, b), y.to_vector(), {1e-5, 1e-5}, 1.0));
}

TEST(LayerNorm, BackwardMatchesFiniteDifferences) {
  const int64_t n = 5, c = 12;
  Tensor x = random_tensor({n, c}, 4), g = random_tensor({c}, 5), b = random_tensor({c}, 6);
  Tensor w = random_tensor({n, c}, 7);
  auto loss = [&] {
    Tensor y = Tensor::empty({n, c}), m = Tensor::empty({n}), s = Tensor::empty({n});
    layer_norm_forward(ec, x, g, b, kEps, y, m, s);
    return weighted_sum(y, w);
  };
  Tensor y = Tensor::empty({n, c}), m = Tensor::empty({n}), s = Tensor::empty({n});
  layer_norm_forward(ec, x, g, b, kEps, y, m, s);
  Tensor dx = Tensor::empty({n, c}), dg = Tensor::zeros({c}), db = Tensor::zeros({c});
  layer_norm_backward(ec, w, x, g, m, s, dx, dg, db);
  const weft::testing::Tolerance fd{3e-3, 3e-3};
  EXPECT_TRUE(close(finite_difference(x, loss), dx.to_vector(), fd));
  EXPECT_TRUE(close(finite_difference(g, loss), dg.to_vector(), fd));
  EXPECT_TRUE(close(finite_difference(b, loss), db.to_vector(), fd));
  // Backward accumulates into dgamma/dbeta.
  std::vector<float> once = dg.to_vector();
  layer_norm_backward(ec, w, x, g, m, s, dx, dg, db);
  for (size_t i = 0; i < once.size(); ++i) EXPECT_FLOAT_EQ(dg.to_vector()[i], 2 * once[i]);
}

TEST(LayerNorm, Bf16WithinTolerance) {
  Tensor x = random_tensor({16, 64}, 8, -1, 1, DType::bf16);
  Tensor g = random_tensor({64}, 9), b = random_tensor({64}, 10);
  Tensor y = Tensor::empty(x.shape(), DType::bf16), m = Tensor::empty({16}),
         s = Tensor::empty({16});
  layer_norm_forward(ec, x, g, b, kEps, y, m, s);
  EXPECT_TRUE(close(layer_norm_ref(x, g, b), y.to_vector(), kBF16, 1.0));
}

TEST(LayerNorm, ParameterGradientsAreThreadCountInvariant) {
  Tensor x = random_tensor({300, 48}, 11), g = random_tensor({48}, 12), b = random_tensor({48}, 13);
  Tensor dy = random_tensor({300, 48}, 14);
  Tensor y = Tensor::empty(x.shape()), m = Tensor::empty({300}), s = Tensor::empty({300});
  layer_norm_forward(ec, x, g, b, kEps, y, m, s);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    Tensor dx = Tensor::empty(x.shape()), dg = Tensor::zeros({48}), db = Tensor::zeros({48});
    layer_norm_backward(ec, dy, x, g, m, s, dx, dg, db);
    results.push_back(dg.to_vector());
    results.push_back(db.to_vector());
  }
  set_num_threads(0);
  EXPECT_EQ(results[0], results[2]);
  EXPECT_EQ(results[1], results[3]);
}

TEST(LayerNorm, BadShapesAreClearErrors) {
  Tensor x = Tensor::zeros({4, 8}), y = Tensor::zeros({4, 8});
  Tensor g = Tensor::zeros({7}), b = Tensor::zeros({8}), m = Tensor::zeros({4}),
         s = Tensor::zeros({4});
  EXPECT_THROW(layer_norm_forward(ec, x, g, b, kEps, y, m, s), Error);
  Tensor g8 = Tensor::zeros({8}), m3 = Tensor::zeros({3});
  EXPECT_THROW(layer_norm_forward(ec, x, g8, b, kEps, y, m3, s), Error);
}

TEST(RmsNorm, ForwardAndBackward) {
  const int64_t n = 6, c = 10;
  Tensor x = random_tensor({n, c}, 15), g = random_tensor({c}, 16), w = random_tensor({n, c}, 17);
  Tensor y = Tensor::empty({n, c}), s = Tensor::empty({n});
  rms_norm_forward(ec, x, g, kEps, y, s);
  EXPECT_TRUE(close(rms_norm_ref(x, g), y.to_vector(), {1e-5, 1e-5}, 1.0));
  auto loss = [&] {
    Tensor yy = Tensor::empty({n, c}), ss = Tensor::empty({n});
    rms_norm_forward(ec, x, g, kEps, yy, ss);
    return weighted_sum(yy, w);
  };
  Tensor dx = Tensor::empty({n, c}), dg = Tensor::zeros({c});
  rms_norm_backward(ec, w, x, g, s, dx, dg);
  const weft::testing::Tolerance fd{3e-3, 3e-3};
  EXPECT_TRUE(close(finite_difference(x, loss), dx.to_vector(), fd));
  EXPECT_TRUE(close(finite_difference(g, loss), dg.to_vector(), fd));
}

TEST(RmsNorm, Bf16WithinTolerance) {
  Tensor x = random_tensor({8, 96}, 18, -1, 1, DType::bf16), g = random_tensor({96}, 19);
  Tensor y = Tensor::empty(x.shape(), DType::bf16), s = Tensor::empty({8});
  rms_norm_forward(ec, x, g, kEps, y, s);
  EXPECT_TRUE(close(rms_norm_ref(x, g), y.to_vector(), kBF16, 1.0));
}

}  // namespace
}  // namespace weft::kernels
