// The local backend's data movement (comm/reduce.h): the streaming paths for
// large buffers give the same bits as the element-by-element definition, for
// every dtype, operation and input count, aligned or not.
#include "weft/comm/reduce.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "weft/core/dtype.h"

namespace weft::comm::detail {
namespace {

// Values that exercise the rounding: random magnitudes across many binades,
// with NaN, ±Inf and -0 sprinkled in. Made once per (count, seed).
const std::vector<float>& values(int64_t n, uint32_t seed) {
  static std::map<std::pair<int64_t, uint32_t>, std::vector<float>> made;
  auto [it, fresh] = made.try_emplace({n, seed});
  std::vector<float>& v = it->second;
  if (!fresh) return v;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(-2.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  v.resize(static_cast<size_t>(n));
  for (auto& x : v) x = std::ldexp(mantissa(rng), exponent(rng));
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), -0.0f, 3.0e38f};
  for (int64_t i = 0; i < n; i += 4099) v[static_cast<size_t>(i)] = specials[(i / 4099) % 5];
  return v;
}

// The definition: inputs combined in order in f32, then finished and rounded once.
float expected(ReduceOp op, const std::vector<std::vector<float>>& in, int64_t i, int divisor) {
  float acc = in[0][static_cast<size_t>(i)];
  for (size_t k = 1; k < in.size(); ++k) {
    const float x = in[k][static_cast<size_t>(i)];
    acc = op == ReduceOp::max ? ((x > acc || std::isnan(x)) ? x : acc) : acc + x;
  }
  if (op == ReduceOp::avg) acc /= static_cast<float>(divisor);
  return acc;
}

bool same(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) ||
         std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

// Byte storage for `count` elements of `dtype` starting `shift` bytes past a
// 64-byte boundary.
struct Buffer {
  std::vector<char> bytes;
  char* data;
  Buffer(int64_t count, DType dtype, int64_t shift)
      : bytes(static_cast<size_t>(count * dtype_bits(dtype) / 8 + 128)) {
    const auto base = reinterpret_cast<uintptr_t>(bytes.data());
    data = bytes.data() + (64 - base % 64) % 64 + shift;
  }
  void set(DType dtype, const std::vector<float>& v) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (dtype == DType::f32) {
        std::memcpy(data + i * 4, &v[i], 4);
      } else {
        const uint16_t h = f32_to_bf16(v[i]);
        std::memcpy(data + i * 2, &h, 2);
      }
    }
  }
  float get(DType dtype, int64_t i) const {
    if (dtype == DType::f32) {
      float x;
      std::memcpy(&x, data + i * 4, 4);
      return x;
    }
    uint16_t h;
    std::memcpy(&h, data + i * 2, 2);
    return bf16_to_f32(h);
  }
};

void check_reduction(DType dtype, ReduceOp op, int k, int64_t count, int64_t shift, bool in_place) {
  const int divisor = k + (op == ReduceOp::avg && k == 2 ? 1 : 0);  // 3 divides, 2^n multiply
  std::vector<Buffer> inputs;
  std::vector<std::vector<float>> held;  // the values as the inputs hold them
  for (int j = 0; j < k; ++j) {
    std::vector<float> v = values(count, static_cast<uint32_t>(j));
    if (dtype == DType::bf16)
      for (auto& x : v) x = bf16_to_f32(f32_to_bf16(x));
    inputs.emplace_back(count, dtype, j == 0 ? shift : 0);
    inputs.back().set(dtype, v);
    held.push_back(std::move(v));
  }
  Buffer out(count, dtype, shift);
  std::vector<const void*> ptrs;
  for (auto& b : inputs) ptrs.push_back(b.data);
  void* dst = in_place ? inputs[0].data : out.data;
  reduce_buffers(dtype, op, dst, ptrs, count, divisor);
  const Buffer& result = in_place ? inputs[0] : out;
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < count; ++i) {
    float want = expected(op, held, i, divisor);
    if (dtype == DType::bf16) want = bf16_to_f32(f32_to_bf16(want));
    if (!same(result.get(dtype, i), want)) {
      if (first < 0) first = i;
      ++wrong;
    }
  }
  EXPECT_EQ(wrong, 0) << dtype_name(dtype) << " " << reduce_op_name(op) << " of " << k
                      << " inputs, " << count << " elements, out shifted " << shift
                      << (in_place ? " (in place)" : "") << ": first mismatch at " << first;
}

TEST(Reduce, StreamingPathMatchesTheDefinitionBitForBit) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    const int64_t elem = dtype_bits(dtype) / 8;
    const int64_t streaming = kStreamingBytes / elem + 37;  // odd: a ragged tail
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
      for (int k : {1, 2, 3, 5}) check_reduction(dtype, op, k, streaming, elem, false);
      check_reduction(dtype, op, 2, streaming, 0, false);
      check_reduction(dtype, op, 2, streaming, 6 * elem, false);
      check_reduction(dtype, op, 2, streaming, elem, true);
      check_reduction(dtype, op, 3, 1001, elem, false);  // below the threshold
    }
  }
}

TEST(Reduce, OddAddressFallsBackToTheOrdinaryLoops) {
  // bf16 output one byte off its alignment: no 64-byte boundary is reachable.
  check_reduction(DType::bf16, ReduceOp::sum, 2, kStreamingBytes / 2 + 5, 1, false);
}

TEST(Copy, ToManyDestinationsCopiesEveryByte) {
  for (int64_t bytes : {int64_t{1000}, kStreamingBytes + 13}) {
    std::vector<char> src(static_cast<size_t>(bytes));
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 131 + 7);
    std::vector<std::vector<char>> dsts(3, std::vector<char>(static_cast<size_t>(bytes) + 64, 0));
    std::vector<void*> ptrs;
    for (size_t d = 0; d < dsts.size(); ++d) ptrs.push_back(dsts[d].data() + d * 5);
    copy_to_many(ptrs, src.data(), bytes);
    for (size_t d = 0; d < dsts.size(); ++d) {
      EXPECT_EQ(std::memcmp(ptrs[d], src.data(), static_cast<size_t>(bytes)), 0)
          << bytes << " bytes to destination " << d;
      EXPECT_EQ(dsts[d][0 + d * 5 + static_cast<size_t>(bytes)], 0) << "wrote past the end";
    }
    std::vector<char> one(static_cast<size_t>(bytes));
    copy_buffer(one.data(), src.data(), bytes);
    EXPECT_EQ(one, src);
  }
}

}  // namespace
}  // namespace weft::comm::detail
