// The residual forms of the norm kernels (kernels/norm.h): the residual add
// (with its dropout) in front of a norm, and the residual gradient (with the
// branch's dropout gradient) after a norm's backward, each one pass, equal
// bit for bit to the separate kernels run one after the other.
#include <gtest/gtest.h>

#include "bitwise.h"
#include "testing.h"
#include "weft/kernels/activation.h"
#include "weft/kernels/norm.h"
#include "weft/kernels/random.h"

namespace weft::kernels {
namespace {

const ExecContext& ec = ExecContext::host();

using weft::testing::bitwise_equal;
using weft::testing::random_tensor;

using weft::testing::error_of;

constexpr float kEps = 1e-5f;

// fn throws a weft::Error whose message contains `text`.
#define EXPECT_THAT_ERROR(fn, text) \
  EXPECT_NE(error_of(fn).find(text), std::string::npos) << error_of(fn)

struct Case {
  int64_t rows, cols;
  DType dtype;
  float p;
};

// Odd widths below and above the 16 lanes of a row's sums, both dtypes, with
// and without dropout.
std::vector<Case> cases() {
  std::vector<Case> out;
  for (DType dt : {DType::f32, DType::bf16})
    for (float p : {0.0f, 0.3f})
      for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 3}, {37, 771}, {130, 64}})
        out.push_back({rows, cols, dt, p});
  return out;
}

std::string describe(const Case& c) {
  return format("{}x{} {} p={}", c.rows, c.cols, dtype_name(c.dtype), c.p);
}

// x + dropout(branch) by the separate kernels; mask set when p > 0.
Tensor separate_add(const Case& c, const Tensor& x, const Tensor& branch, const ResidualDropout& d,
                    Tensor& mask) {
  Tensor dropped = branch;
  if (c.p > 0.0f) {
    dropped = Tensor::empty(branch.shape(), c.dtype);
    mask = Tensor::empty(branch.shape(), DType::u8);
    dropout_forward(ec, branch, d.p, d.seed, d.offset, dropped, mask);
  }
  Tensor sum = Tensor::empty(x.shape(), c.dtype);
  add(ec, x, dropped, sum);
  return sum;
}

TEST(ResidualNorm, AddLayerNormIsDropoutAddThenLayerNorm) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(describe(c));
    const Shape shape{c.rows, c.cols};
    const Tensor x = random_tensor(shape, 1, -2, 2, c.dtype),
                 br = random_tensor(shape, 2, -1, 1, c.dtype);
    const Tensor g = random_tensor({c.cols}, 3, 0.5, 1.5), b = random_tensor({c.cols}, 4);
    const ResidualDropout d{.p = c.p, .seed = 77, .offset = 1234};
    Tensor ref_mask;
    const Tensor ref_sum = separate_add(c, x, br, d, ref_mask);
    Tensor ref_y = Tensor::empty(shape, c.dtype), ref_m = Tensor::empty({c.rows}),
           ref_s = Tensor::empty({c.rows});
    layer_norm_forward(ec, ref_sum, g, b, kEps, ref_y, ref_m, ref_s);

    Tensor sum = Tensor::empty(shape, c.dtype), y = Tensor::empty(shape, c.dtype),
           m = Tensor::empty({c.rows}), s = Tensor::empty({c.rows});
    Tensor mask = c.p > 0.0f ? Tensor::empty(shape, DType::u8) : Tensor();
    add_layer_norm_forward(ec, x, br, d, g, b, kEps, sum, y, m, s, mask);
    EXPECT_TRUE(bitwise_equal(ref_sum, sum));
    EXPECT_TRUE(bitwise_equal(ref_y, y));
    EXPECT_TRUE(bitwise_equal(ref_m, m));
    EXPECT_TRUE(bitwise_equal(ref_s, s));
    if (c.p > 0.0f) {
      EXPECT_TRUE(bitwise_equal(ref_mask, mask));
    }
  }
}

TEST(ResidualNorm, DropoutRowsDrawAtTheirStreamRows) {
  // Context parallelism's row map: 3 sequences of 16 rows held as chunks 1
  // and 2 of 4 (segments of 4 rows, groups of 8): row r draws at stream row
  // stream_row(r), here (r / 8)·16 + {4, 8}[(r / 4) % 2] + r % 4.
  const int64_t rows = 24, cols = 40;
  const kernels::DropoutRows map{.segment = 4, .group_stride = 16, .start = {4, 8}};
  EXPECT_EQ(map.stream_row(0), 4);
  EXPECT_EQ(map.stream_row(5), 9);
  EXPECT_EQ(map.stream_row(17), 37);
  const ResidualDropout d{.p = 0.3f, .seed = 5, .offset = 99, .rows = map};
  const Tensor x = random_tensor({rows, cols}, 1), br = random_tensor({rows, cols}, 2);
  const Tensor g = random_tensor({cols}, 3, 0.5, 1.5);
  Tensor sum = Tensor::empty({rows, cols}), y = Tensor::empty({rows, cols}),
         s = Tensor::empty({rows}), mask = Tensor::empty({rows, cols}, DType::u8);
  add_rms_norm_forward(ec, x, br, d, g, kEps, sum, y, s, mask);
  const uint8_t* m = mask.data<uint8_t>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      const uint64_t i = static_cast<uint64_t>(map.stream_row(r) * cols + j);
      ASSERT_EQ(m[r * cols + j], uniform_at(d.seed, d.offset, i) >= d.p ? 1 : 0) << r << " " << j;
    }
}

TEST(ResidualNorm, AddRmsNormIsDropoutAddThenRmsNorm) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(describe(c));
    const Shape shape{c.rows, c.cols};
    const Tensor x = random_tensor(shape, 5, -2, 2, c.dtype),
                 br = random_tensor(shape, 6, -1, 1, c.dtype);
    const Tensor g = random_tensor({c.cols}, 7, 0.5, 1.5);
    const ResidualDropout d{.p = c.p, .seed = 78, .offset = 99};
    Tensor ref_mask;
    const Tensor ref_sum = separate_add(c, x, br, d, ref_mask);
    Tensor ref_y = Tensor::empty(shape, c.dtype), ref_s = Tensor::empty({c.rows});
    rms_norm_forward(ec, ref_sum, g, kEps, ref_y, ref_s);

    Tensor sum = Tensor::empty(shape, c.dtype), y = Tensor::empty(shape, c.dtype),
           s = Tensor::empty({c.rows});
    Tensor mask = c.p > 0.0f ? Tensor::empty(shape, DType::u8) : Tensor();
    add_rms_norm_forward(ec, x, br, d, g, kEps, sum, y, s, mask);
    EXPECT_TRUE(bitwise_equal(ref_sum, sum));
    EXPECT_TRUE(bitwise_equal(ref_y, y));
    EXPECT_TRUE(bitwise_equal(ref_s, s));
    if (c.p > 0.0f) {
      EXPECT_TRUE(bitwise_equal(ref_mask, mask));
    }
  }
}

// The residual gradient of a backward: dres, and with p > 0 the dropout mask
// of the forward's branch.
struct Residual {
  Tensor dres, mask;
};

Residual residual_of(const Case& c) {
  const Shape shape{c.rows, c.cols};
  Residual r{random_tensor(shape, 20, -1, 1, c.dtype), {}};
  if (c.p > 0.0f) {
    Tensor dropped = Tensor::empty(shape, c.dtype);
    r.mask = Tensor::empty(shape, DType::u8);
    dropout_forward(ec, random_tensor(shape, 21, -1, 1, c.dtype), c.p, 5, 6, dropped, r.mask);
  }
  return r;
}

// dx + dres, and its dropout gradient, by the separate kernels.
void separate_residual(const Case& c, const Residual& r, Tensor& dx, Tensor& dbranch) {
  Tensor total = Tensor::empty(dx.shape(), c.dtype);
  add(ec, r.dres, dx, total);
  dx = total;
  if (c.p > 0.0f) {
    dbranch = Tensor::empty(dx.shape(), c.dtype);
    dropout_backward(ec, dx, r.mask, c.p, dbranch);
  }
}

TEST(ResidualNorm, LayerNormBackwardAddsTheResidualGradient) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(describe(c));
    const Shape shape{c.rows, c.cols};
    const Tensor x = random_tensor(shape, 8, -2, 2, c.dtype),
                 dy = random_tensor(shape, 9, -1, 1, c.dtype);
    const Tensor g = random_tensor({c.cols}, 10, 0.5, 1.5), b = random_tensor({c.cols}, 11);
    Tensor y = Tensor::empty(shape, c.dtype), m = Tensor::empty({c.rows}),
           s = Tensor::empty({c.rows});
    layer_norm_forward(ec, x, g, b, kEps, y, m, s);
    const Residual r = residual_of(c);

    Tensor ref_dx = Tensor::empty(shape, c.dtype), ref_dbranch;
    Tensor ref_dg = random_tensor({c.cols}, 12), ref_db = random_tensor({c.cols}, 13);
    layer_norm_backward(ec, dy, x, g, m, s, ref_dx, ref_dg, ref_db);
    separate_residual(c, r, ref_dx, ref_dbranch);

    Tensor dx = Tensor::empty(shape, c.dtype), dbranch = Tensor::empty(shape, c.dtype);
    Tensor dg = random_tensor({c.cols}, 12), db = random_tensor({c.cols}, 13);
    ResidualGrad rg{.dres = &r.dres};
    if (c.p > 0.0f) rg = {.dres = &r.dres, .mask = &r.mask, .p = c.p, .dbranch = &dbranch};
    layer_norm_backward(ec, dy, x, g, m, s, dx, dg, db, rg);
    EXPECT_TRUE(bitwise_equal(ref_dx, dx));
    EXPECT_TRUE(bitwise_equal(ref_dg, dg));
    EXPECT_TRUE(bitwise_equal(ref_db, db));
    if (c.p > 0.0f) {
      EXPECT_TRUE(bitwise_equal(ref_dbranch, dbranch));
    }
  }
}

TEST(ResidualNorm, RmsNormBackwardAddsTheResidualGradient) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(describe(c));
    const Shape shape{c.rows, c.cols};
    const Tensor x = random_tensor(shape, 14, -2, 2, c.dtype),
                 dy = random_tensor(shape, 15, -1, 1, c.dtype);
    const Tensor g = random_tensor({c.cols}, 16, 0.5, 1.5);
    Tensor y = Tensor::empty(shape, c.dtype), s = Tensor::empty({c.rows});
    rms_norm_forward(ec, x, g, kEps, y, s);
    const Residual r = residual_of(c);

    Tensor ref_dx = Tensor::empty(shape, c.dtype), ref_dbranch,
           ref_dg = random_tensor({c.cols}, 17);
    rms_norm_backward(ec, dy, x, g, s, ref_dx, ref_dg);
    separate_residual(c, r, ref_dx, ref_dbranch);

    Tensor dx = Tensor::empty(shape, c.dtype), dbranch = Tensor::empty(shape, c.dtype);
    Tensor dg = random_tensor({c.cols}, 17);
    ResidualGrad rg{.dres = &r.dres};
    if (c.p > 0.0f) rg = {.dres = &r.dres, .mask = &r.mask, .p = c.p, .dbranch = &dbranch};
    rms_norm_backward(ec, dy, x, g, s, dx, dg, rg);
    EXPECT_TRUE(bitwise_equal(ref_dx, dx));
    EXPECT_TRUE(bitwise_equal(ref_dg, dg));
    if (c.p > 0.0f) {
      EXPECT_TRUE(bitwise_equal(ref_dbranch, dbranch));
    }
  }
}

TEST(ResidualNorm, BadArgumentsAreClearErrors) {
  const Tensor x = random_tensor({4, 8}, 30), br = random_tensor({4, 8}, 31);
  const Tensor g = Tensor::full({8}, 1.0f), b = Tensor::zeros({8});
  Tensor y = Tensor::empty({4, 8}), m = Tensor::empty({4}), s = Tensor::empty({4});
  Tensor sum = Tensor::empty({4, 8}), none;
  Tensor x_alias = x;
  EXPECT_THAT_ERROR(
      [&] { add_layer_norm_forward(ec, x, br, {}, g, b, kEps, x_alias, y, m, s, none); },
      "sum must not share storage");
  EXPECT_THAT_ERROR(
      [&] { add_layer_norm_forward(ec, x, br, {.p = 0.1f}, g, b, kEps, sum, y, m, s, none); },
      "dropout needs a u8 mask");
  Tensor narrow = Tensor::empty({4, 7});
  EXPECT_THAT_ERROR([&] { add_rms_norm_forward(ec, x, narrow, {}, g, kEps, sum, y, s, none); },
                    "branch");
  Tensor dx = Tensor::empty({4, 8}), dg = Tensor::zeros({8}), db = Tensor::zeros({8});
  EXPECT_THAT_ERROR([&] { layer_norm_backward(ec, br, x, g, m, s, dx, dg, db, {.dres = &dx}); },
                    "must not overwrite the residual gradient");
  Tensor dbranch = Tensor::empty({4, 8});
  EXPECT_THAT_ERROR(
      [&] { rms_norm_backward(ec, br, x, g, s, dx, dg, {.dres = &br, .dbranch = &dbranch}); },
      "needs the dropout mask");
}

}  // namespace
}  // namespace weft::kernels
