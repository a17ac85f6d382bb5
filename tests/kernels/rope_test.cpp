// Rotary position embeddings (kernels/rope.h) against the direct formula in
// fp64: the table, the rotation of q and k (v untouched) under every head
// layout, row layout and position offset, its gradient, and the argument
// checks.
#include "weft/kernels/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "testing.h"

namespace weft::kernels {
namespace {

const ExecContext& ec = ExecContext::host();

using weft::testing::close;
using weft::testing::error_of;
using weft::testing::finite_difference;
using weft::testing::random_tensor;
using weft::testing::weighted_sum;

constexpr double kTheta = 10000.0;

struct Case {
  int64_t B, T, H, Hkv, D;  // Hkv 0: H
  bool sequence_major;
  int64_t offset;

  int64_t kv() const { return Hkv == 0 ? H : Hkv; }
  int64_t width() const { return (H + 2 * kv()) * D; }
  Shape shape() const { return sequence_major ? Shape{T, B, width()} : Shape{B, T, width()}; }
  RopeConfig config() const {
    return {
        .heads = H, .kv_heads = Hkv, .sequence_major = sequence_major, .position_offset = offset};
  }
};

// The rotation of every q and k head of x by its row's position (sign -1:
// the inverse rotation, i.e. the gradient), from the formula in fp64 with
// the table's f32 cos and sin.
std::vector<double> reference(const Case& c, const std::vector<double>& x, double sign) {
  std::vector<double> y = x;
  const int64_t half = c.D / 2;
  for (int64_t row = 0; row < c.B * c.T; ++row) {
    const int64_t t = c.sequence_major ? row / c.B : row % c.T;
    const double p = static_cast<double>(t + c.offset);
    for (int64_t h = 0; h < c.H + c.kv(); ++h)
      for (int64_t i = 0; i < half; ++i) {
        const double angle =
            p * std::pow(kTheta, -2.0 * static_cast<double>(i) / static_cast<double>(c.D));
        const double cs = static_cast<float>(std::cos(angle));
        const double sn = sign * static_cast<float>(std::sin(angle));
        const size_t a = static_cast<size_t>(row * c.width() + h * c.D + i);
        const size_t b = a + static_cast<size_t>(half);
        y[a] = x[a] * cs - x[b] * sn;
        y[b] = x[b] * cs + x[a] * sn;
      }
  }
  return y;
}

std::vector<double> doubles(const Tensor& t) {
  std::vector<float> v = t.to_vector();
  return {v.begin(), v.end()};
}

const Case kCases[] = {
    {2, 5, 4, 0, 8, false, 0},   {2, 5, 4, 0, 8, true, 0},  {3, 7, 4, 2, 16, false, 3},
    {3, 7, 4, 2, 16, true, 11},  {1, 9, 8, 1, 4, false, 0}, {2, 4, 6, 3, 2, true, 100},
    {1, 1, 1, 1, 64, false, 37},
};

TEST(Rope, TableIsCosAndSinOfTheAngles) {
  const Tensor table = rope_table(ec, 50, 12, kTheta);
  ASSERT_EQ(table.shape(), (Shape{50, 6, 2}));
  ASSERT_EQ(table.dtype(), DType::f32);
  const std::vector<float> v = table.to_vector();
  for (int64_t p = 0; p < 50; ++p)
    for (int64_t i = 0; i < 6; ++i) {
      const double angle = static_cast<double>(p) * std::pow(kTheta, -2.0 * i / 12.0);
      ASSERT_EQ(v[static_cast<size_t>((p * 6 + i) * 2)], static_cast<float>(std::cos(angle)));
      ASSERT_EQ(v[static_cast<size_t>((p * 6 + i) * 2 + 1)], static_cast<float>(std::sin(angle)));
    }
  EXPECT_EQ(rope_table(ec, 0, 4, kTheta).numel(), 0);
}

TEST(Rope, ForwardMatchesFormula) {
  for (const Case& c : kCases)
    for (DType dt : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(::testing::Message() << "B " << c.B << " T " << c.T << " H " << c.H << " Hkv "
                                        << c.Hkv << " D " << c.D << " seq " << c.sequence_major
                                        << " offset " << c.offset << " " << dtype_name(dt));
      const Tensor x = random_tensor(c.shape(), 70, -2, 2, dt);
      Tensor y = x.clone();
      const Tensor table = rope_table(ec, c.T + c.offset, c.D, kTheta);
      rope_forward(ec, y, table, c.config());
      // v untouched, bitwise, since reference copies it.
      const std::vector<double> want = reference(c, doubles(x), 1.0);
      EXPECT_TRUE(close(want, y.to_vector(),
                        dt == DType::f32 ? weft::testing::kF32 : weft::testing::kBF16));
      const std::vector<float> got = y.to_vector();
      for (int64_t row = 0; row < c.B * c.T; ++row)
        for (int64_t k = (c.H + c.kv()) * c.D; k < c.width(); ++k) {
          const size_t i = static_cast<size_t>(row * c.width() + k);
          ASSERT_EQ(static_cast<double>(got[i]), want[i]) << "v changed at " << i;
        }
    }
}

TEST(Rope, BackwardIsTheInverseRotation) {
  for (const Case& c : kCases)
    for (DType dt : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(::testing::Message() << "H " << c.H << " Hkv " << c.Hkv << " D " << c.D
                                        << " seq " << c.sequence_major << " " << dtype_name(dt));
      const Tensor dy = random_tensor(c.shape(), 71, -2, 2, dt);
      Tensor dx = dy.clone();
      const Tensor table = rope_table(ec, c.T + c.offset + 5, c.D, kTheta);
      rope_backward(ec, dx, table, c.config());
      EXPECT_TRUE(close(reference(c, doubles(dy), -1.0), dx.to_vector(),
                        dt == DType::f32 ? weft::testing::kF32 : weft::testing::kBF16));
    }
}

TEST(Rope, BackwardMatchesFiniteDifferences) {
  const Case c{2, 3, 4, 2, 4, true, 2};
  const Tensor table = rope_table(ec, 5, c.D, kTheta);
  Tensor x = random_tensor(c.shape(), 72);
  const Tensor w = random_tensor(c.shape(), 73);
  Tensor y = Tensor::empty(c.shape());
  auto loss = [&] {
    y.copy_from(x);
    rope_forward(ec, y, table, c.config());
    return weighted_sum(y, w);
  };
  const std::vector<double> fd = finite_difference(x, loss);
  Tensor grad = w.clone();
  rope_backward(ec, grad, table, c.config());
  EXPECT_TRUE(close(fd, grad.to_vector(), {2e-3, 2e-4}));
}

TEST(Rope, ForwardThenBackwardIsTheIdentity) {
  const Case c{2, 6, 4, 1, 8, false, 4};
  const Tensor table = rope_table(ec, 10, c.D, kTheta);
  const Tensor x = random_tensor(c.shape(), 74);
  Tensor y = x.clone();
  rope_forward(ec, y, table, c.config());
  rope_backward(ec, y, table, c.config());
  EXPECT_TRUE(close(x, y, weft::testing::kF32));
}

TEST(Rope, RejectsBadArguments) {
  const Tensor table = rope_table(ec, 8, 4, kTheta);
  Tensor qkv = Tensor::zeros({2, 8, 32});  // H 4, Hkv 2, D 4
  const RopeConfig gqa{.heads = 4, .kv_heads = 2};
  EXPECT_NO_THROW(rope_forward(ec, qkv, table, gqa));
  // Positions 0 .. 8 with offset 1: the table of 8 stops short.
  std::string e = error_of(
      [&] { rope_forward(ec, qkv, table, {.heads = 4, .kv_heads = 2, .position_offset = 1}); });
  EXPECT_NE(e.find("the table covers positions below 8"), std::string::npos) << e;
  // Sequence-major: T is the first dimension (2), so the same table covers it.
  EXPECT_NO_THROW(rope_forward(
      ec, qkv, table, {.heads = 4, .kv_heads = 2, .sequence_major = true, .position_offset = 6}));
  e = error_of([&] { rope_backward(ec, qkv, table, {.heads = 4, .kv_heads = 3}); });
  EXPECT_NE(e.find("(H + 2·Hkv)·D"), std::string::npos) << e;
  // D = 3 is odd.
  Tensor odd = Tensor::zeros({1, 2, 18});
  e = error_of([&] { rope_forward(ec, odd, table, {.heads = 2, .kv_heads = 2}); });
  EXPECT_NE(e.find("D even"), std::string::npos) << e;
  // A table for another head size.
  const Tensor wide = rope_table(ec, 8, 8, kTheta);
  e = error_of([&] { rope_forward(ec, qkv, wide, gqa); });
  EXPECT_NE(e.find("the table must be f32 (P, D/2 = 2, 2)"), std::string::npos) << e;
  Tensor ints = Tensor::zeros({2, 8, 32}, DType::i32);
  EXPECT_THROW(rope_forward(ec, ints, table, gqa), Error);
  EXPECT_THROW(rope_forward(ec, qkv, table, {.heads = 0}), Error);
  EXPECT_THROW(rope_forward(ec, qkv, table, {.heads = 4, .position_offset = -1}), Error);
  EXPECT_THROW(rope_table(ec, 8, 5, kTheta), Error);
  EXPECT_THROW(rope_table(ec, -1, 4, kTheta), Error);
  EXPECT_THROW(rope_table(ec, 8, 4, 0.0), Error);
}

}  // namespace
}  // namespace weft::kernels
