// SwiGLU (kernels/activation.h) against the formula in fp64, forward and
// backward, f32 and bf16, against finite differences, and its argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "testing.h"
#include "weft/kernels/activation.h"

namespace weft::kernels {
namespace {

const ExecContext& ec = ExecContext::host();

using weft::testing::close;
using weft::testing::error_of;
using weft::testing::finite_difference;
using weft::testing::random_tensor;
using weft::testing::weighted_sum;

double sigmoid(double g) { return 1.0 / (1.0 + std::exp(-g)); }

// gu (rows, 2n) -> silu(gate)·up (rows, n)
std::vector<double> forward_reference(const std::vector<float>& gu, int64_t rows, int64_t n) {
  std::vector<double> out(static_cast<size_t>(rows * n));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      const double g = gu[static_cast<size_t>(r * 2 * n + j)];
      const double u = gu[static_cast<size_t>(r * 2 * n + n + j)];
      out[static_cast<size_t>(r * n + j)] = g * sigmoid(g) * u;
    }
  return out;
}

// dy (rows, n), gu (rows, 2n) -> dgu (rows, 2n)
std::vector<double> backward_reference(const std::vector<float>& dy, const std::vector<float>& gu,
                                       int64_t rows, int64_t n) {
  std::vector<double> dgu(gu.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      const double g = gu[static_cast<size_t>(r * 2 * n + j)];
      const double u = gu[static_cast<size_t>(r * 2 * n + n + j)];
      const double d = dy[static_cast<size_t>(r * n + j)], s = sigmoid(g);
      dgu[static_cast<size_t>(r * 2 * n + j)] = d * u * s * (1.0 + g * (1.0 - s));
      dgu[static_cast<size_t>(r * 2 * n + n + j)] = d * g * s;
    }
  return dgu;
}

struct Case {
  Shape gu;  // (..., 2N)
  DType dtype;
};

TEST(Swiglu, ForwardAndBackwardMatchReference) {
  const Case cases[] = {{{3, 5, 14}, DType::f32},
                        {{37, 2 * 771}, DType::f32},
                        {{1, 2}, DType::f32},
                        {{3, 5, 14}, DType::bf16},
                        {{37, 2 * 771}, DType::bf16}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.gu << " " << dtype_name(c.dtype));
    const int64_t n = c.gu.last() / 2, rows = c.gu.numel() / c.gu.last();
    std::vector<int64_t> dims;
    for (int64_t i = 0; i + 1 < c.gu.rank(); ++i) dims.push_back(c.gu[i]);
    dims.push_back(n);
    const Shape half = Shape(dims);
    // Gates wide enough to reach silu's saturated tails.
    const Tensor gu = random_tensor(c.gu, 80, -8, 8, c.dtype);
    const Tensor dy = random_tensor(half, 81, -1, 1, c.dtype);
    Tensor out = Tensor::empty(half, c.dtype), dgu = Tensor::empty(c.gu, c.dtype);
    swiglu_forward(ec, gu, out);
    swiglu_backward(ec, dy, gu, dgu);
    const weft::testing::Tolerance tol =
        c.dtype == DType::f32 ? weft::testing::kF32 : weft::testing::kBF16;
    EXPECT_TRUE(close(forward_reference(gu.to_vector(), rows, n), out.to_vector(), tol));
    EXPECT_TRUE(
        close(backward_reference(dy.to_vector(), gu.to_vector(), rows, n), dgu.to_vector(), tol));
  }
}

TEST(Swiglu, SaturatesWithoutNans) {
  const Tensor gu =
      Tensor::from({1, 6}, std::vector<float>{-200.0f, 0.0f, 200.0f, 2.0f, 3.0f, 4.0f});
  Tensor out = Tensor::empty({1, 3}), dgu = Tensor::empty({1, 6});
  swiglu_forward(ec, gu, out);
  swiglu_backward(ec, Tensor::full({1, 3}, 1.0f), gu, dgu);
  const std::vector<float> o = out.to_vector(), d = dgu.to_vector();
  EXPECT_EQ(o[0], 0.0f);
  EXPECT_EQ(o[1], 0.0f);
  EXPECT_EQ(o[2], 800.0f);
  EXPECT_EQ(d[0], 0.0f);  // silu' -> 0 for g -> -inf
  EXPECT_EQ(d[1], 1.5f);  // silu'(0) = 1/2, times up = 3
  EXPECT_EQ(d[2], 4.0f);  // silu' -> 1 for g -> +inf, times up = 4
  EXPECT_EQ(d[3], 0.0f);
  EXPECT_EQ(d[4], 0.0f);
  EXPECT_EQ(d[5], 200.0f);
}

TEST(Swiglu, BackwardMatchesFiniteDifferences) {
  Tensor gu = random_tensor({4, 10}, 82, -3, 3);
  const Tensor w = random_tensor({4, 5}, 83);
  Tensor out = Tensor::empty({4, 5});
  auto loss = [&] {
    swiglu_forward(ec, gu, out);
    return weighted_sum(out, w);
  };
  const std::vector<double> fd = finite_difference(gu, loss);
  Tensor dgu = Tensor::empty({4, 10});
  swiglu_backward(ec, w, gu, dgu);
  EXPECT_TRUE(close(fd, dgu.to_vector(), {2e-3, 2e-4}));
}

TEST(Swiglu, RejectsBadShapes) {
  const Tensor gu = Tensor::zeros({4, 10});
  Tensor out = Tensor::empty({4, 5});
  EXPECT_NO_THROW(swiglu_forward(ec, gu, out));
  Tensor odd = Tensor::zeros({4, 9});
  std::string e = error_of([&] { swiglu_forward(ec, odd, out); });
  EXPECT_NE(e.find("(..., 2N) = [gate | up]"), std::string::npos) << e;
  Tensor wide = Tensor::empty({4, 10});
  e = error_of([&] { swiglu_forward(ec, gu, wide); });
  EXPECT_NE(e.find("a last dimension of 5"), std::string::npos) << e;
  Tensor rows = Tensor::empty({2, 5});
  EXPECT_THROW(swiglu_forward(ec, gu, rows), Error);
  Tensor bf16 = Tensor::empty({4, 5}, DType::bf16);
  EXPECT_THROW(swiglu_forward(ec, gu, bf16), Error);
  Tensor dgu = Tensor::empty({4, 10});
  EXPECT_THROW(swiglu_backward(ec, gu, gu, dgu), Error);   // dy (…, 2N)
  EXPECT_THROW(swiglu_backward(ec, out, gu, out), Error);  // dgu (…, N)
  Tensor same = gu.clone();
  e = error_of([&] { swiglu_backward(ec, out, same, same); });
  EXPECT_NE(e.find("cannot write dgu over gu or dy"), std::string::npos) << e;
}

}  // namespace
}  // namespace weft::kernels
