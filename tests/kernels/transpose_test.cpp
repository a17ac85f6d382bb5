#include "weft/kernels/transpose.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "testing.h"
#include "weft/core/threads.h"

namespace weft::kernels {
namespace {

// The host context: the calling thread's CPU threads.
const ExecContext& ec = ExecContext::host();

using weft::testing::random_tensor;

// The expected bytes of transpose01(ec, t): element (i, j, rest) moves to (j, i, rest).
std::vector<uint8_t> swapped_bytes(const Tensor& t) {
  const int64_t rows = t.size(0), cols = t.size(1);
  if (rows * cols == 0) return {};  // an empty tensor: nothing moves
  const int64_t bytes = t.nbytes() / (rows * cols);
  const auto* src = static_cast<const uint8_t*>(t.raw());
  std::vector<uint8_t> out(static_cast<size_t>(t.nbytes()));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      std::memcpy(out.data() + (j * rows + i) * bytes, src + (i * cols + j) * bytes,
                  static_cast<size_t>(bytes));
    }
  return out;
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw());
  return {p, p + t.nbytes()};
}

Shape swap_shape(Shape s) {
  std::swap(s[0], s[1]);
  return s;
}

TEST(Transpose01, TokensAreSwapped) {
  // (B, T) token ids -> (T, B)
  Tensor tokens = Tensor::from_i32({2, 3}, std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  Tensor out = Tensor::empty({3, 2}, DType::i32);
  transpose01(ec, tokens, out);
  const int32_t* p = out.data<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(p, p + 6), (std::vector<int32_t>{1, 4, 2, 5, 3, 6}));
}

TEST(Transpose01, EveryDtypeAndRank) {
  struct Case {
    Shape shape;
    DType dtype;
  };
  const Case cases[] = {{{7, 13}, DType::f32},       {{5, 9, 11}, DType::bf16},
                        {{3, 4, 2, 5}, DType::f32},  {{6, 1, 3}, DType::i32},
                        {{1, 6, 4}, DType::u8},      {{4, 3, 6}, DType::e2m1},
                        {{33, 17, 64}, DType::bf16}, {{0, 3, 2}, DType::f32}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << dtype_name(c.dtype) << " " << c.shape);
    Tensor in = Tensor::empty(c.shape, c.dtype);
    auto* raw = static_cast<uint8_t*>(in.raw());
    for (int64_t i = 0; i < in.nbytes(); ++i) raw[i] = static_cast<uint8_t>(i * 37 + 11);
    Tensor out = Tensor::empty(swap_shape(c.shape), c.dtype);
    transpose01(ec, in, out);
    EXPECT_EQ(bytes_of(out), swapped_bytes(in));
    // Twice is the identity.
    Tensor back = Tensor::empty(c.shape, c.dtype);
    transpose01(ec, out, back);
    EXPECT_EQ(bytes_of(back), bytes_of(in));
  }
}

TEST(Transpose01, SameForAnyThreadCount) {
  Tensor in = random_tensor({64, 48, 32}, 1);
  Tensor one = Tensor::empty({48, 64, 32}), two = Tensor::empty({48, 64, 32});
  set_num_threads(1);
  transpose01(ec, in, one);
  set_num_threads(2);
  transpose01(ec, in, two);
  set_num_threads(0);
  EXPECT_EQ(one.to_vector(), two.to_vector());
  EXPECT_EQ(bytes_of(one), swapped_bytes(in));
}

TEST(Transpose01, RejectsBadArguments) {
  Tensor in = Tensor::zeros({2, 3, 4});
  Tensor flat = Tensor::zeros({6});
  Tensor flat_out = Tensor::zeros({6});
  EXPECT_THROW(transpose01(ec, flat, flat_out), Error);
  Tensor same = Tensor::zeros({2, 3, 4});
  EXPECT_THROW(transpose01(ec, in, same), Error);
  Tensor other_dtype = Tensor::zeros({3, 2, 4}, DType::bf16);
  EXPECT_THROW(transpose01(ec, in, other_dtype), Error);
  // e2m1 packs two elements a byte: a row of 3 would split one.
  Tensor nibbles = Tensor::zeros({2, 2, 3}, DType::e2m1);
  Tensor nibbles_out = Tensor::zeros({2, 2, 3}, DType::e2m1);
  EXPECT_THROW(transpose01(ec, nibbles, nibbles_out), Error);
  Tensor square = Tensor::zeros({3, 3});
  EXPECT_THROW(transpose01(ec, square, square), Error);
}

}  // namespace
}  // namespace weft::kernels
