// The local backend's data movement (comm/detail/reduce.h): the streaming paths for
// large buffers give the same bits as the element-by-element definition, for
// every dtype, operation and input count, aligned or not.
#include "weft/comm/detail/reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "weft/core/dtype.h"
#include "weft/core/error.h"

namespace weft::comm::detail {
namespace {

// Input bits that exercise the arithmetic: random magnitudes across many
// binades, and at random places (different for every input, so that they
// meet ordinary numbers and each other) NaNs with payloads (quiet and
// signalling, payload in the high or only in the low bits), ±Inf, ±0,
// subnormals, the largest finite value and sums that round to Inf in bf16.
// Made once per (count, seed, dtype).
const std::vector<uint32_t>& input_bits(int64_t n, uint32_t seed, DType dtype) {
  static std::map<std::tuple<int64_t, uint32_t, DType>, std::vector<uint32_t>> made;
  auto [it, fresh] = made.try_emplace({n, seed, dtype});
  std::vector<uint32_t>& v = it->second;
  if (!fresh) return v;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(-2.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::uniform_int_distribution<int> special(0, 255);
  const uint32_t specials[] = {0x7fc00000u, 0xffc12345u, 0x7f800001u, 0x7fa00000u, 0x7f800000u,
                               0xff800000u, 0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu,
                               0x7f7fffffu, 0x7f7f0000u, 0x7b000000u, 0xff7f0000u};
  v.resize(static_cast<size_t>(n));
  for (auto& x : v) {
    const int s = special(rng);
    x = s < static_cast<int>(std::size(specials))
            ? specials[s]
            : std::bit_cast<uint32_t>(std::ldexp(mantissa(rng), exponent(rng)));
    if (dtype == DType::bf16) x = f32_to_bf16(std::bit_cast<float>(x));  // rounds a number
    if (dtype == DType::bf16 && s < static_cast<int>(std::size(specials))) x = specials[s] >> 16;
  }
  return v;
}

// The element as the reduction reads it: f32 bits, or bf16 bits widened.
float element(DType dtype, uint32_t bits) {
  return std::bit_cast<float>(dtype == DType::f32 ? bits : bits << 16);
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
  void set(DType dtype, const std::vector<uint32_t>& v) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (dtype == DType::f32) {
        std::memcpy(data + i * 4, &v[i], 4);
      } else {
        const auto h = static_cast<uint16_t>(v[i]);
        std::memcpy(data + i * 2, &h, 2);
      }
    }
  }
  uint32_t get(DType dtype, int64_t i) const {
    uint32_t x = 0;
    if (dtype == DType::f32) {
      std::memcpy(&x, data + i * 4, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, data + i * 2, 2);
      x = h;
    }
    return x;
  }
};

// The definition: inputs combined in order in f32 (max lets NaN win), then
// avg divides (multiplies by 1/divisor when that is exact), and the result is
// rounded once to the output type. Returns the result's bits and whether it
// is only specified up to its NaN payload: a sum where two NaNs meet may
// return either, whether they were inputs or one came from inf + -inf (the
// compiler may swap the operands of an addition; x86 returns the first
// one's NaN).
std::pair<uint32_t, bool> expected(DType dtype, ReduceOp op,
                                   const std::vector<const std::vector<uint32_t>*>& in, int64_t i,
                                   int divisor) {
  float acc = element(dtype, (*in[0])[static_cast<size_t>(i)]);
  bool nans_meet = false;
  for (size_t k = 1; k < in.size(); ++k) {
    const float x = element(dtype, (*in[k])[static_cast<size_t>(i)]);
    nans_meet = nans_meet || (std::isnan(acc) && std::isnan(x));
    acc = op == ReduceOp::max ? ((x > acc || std::isnan(x)) ? x : acc) : acc + x;
  }
  if (op == ReduceOp::avg) {
    const bool exact = divisor == 1 || divisor == 2 || divisor == 4 || divisor == 8;
    acc = exact ? acc * (1.0f / static_cast<float>(divisor)) : acc / static_cast<float>(divisor);
  }
  const uint32_t bits =
      dtype == DType::f32 ? std::bit_cast<uint32_t>(acc) : uint32_t{f32_to_bf16(acc)};
  return {bits, op != ReduceOp::max && nans_meet};
}

void check_reduction(DType dtype, ReduceOp op, int k, int divisor, int64_t count, int64_t shift,
                     bool in_place) {
  std::vector<Buffer> inputs;
  std::vector<const std::vector<uint32_t>*> held;  // the bits the inputs hold
  for (int j = 0; j < k; ++j) {
    held.push_back(&input_bits(count, static_cast<uint32_t>(j), dtype));
    inputs.emplace_back(count, dtype, j == 0 ? shift : 0);
    inputs.back().set(dtype, *held.back());
  }
  Buffer out(count, dtype, shift);
  std::vector<const void*> ptrs;
  for (auto& b : inputs) ptrs.push_back(b.data);
  void* dst = in_place ? inputs[0].data : out.data;
  reduce_buffers(dtype, op, dst, ptrs, count, divisor);
  const Buffer& result = in_place ? inputs[0] : out;
  int64_t wrong = 0, first = -1;
  uint32_t got_first = 0, want_first = 0;
  for (int64_t i = 0; i < count; ++i) {
    const auto [want, any_nan] = expected(dtype, op, held, i, divisor);
    const uint32_t got = result.get(dtype, i);
    const bool ok = got == want || (any_nan && std::isnan(element(dtype, got)));
    if (!ok && first < 0) {
      first = i;
      got_first = got;
      want_first = want;
    }
    wrong += ok ? 0 : 1;
  }
  EXPECT_EQ(wrong, 0) << dtype_name(dtype) << " " << reduce_op_name(op) << " of " << k
                      << " inputs (divisor " << divisor << "), " << count
                      << " elements, out shifted " << shift << (in_place ? " (in place)" : "")
                      << ": first mismatch at " << first << ": got bits " << std::hex << got_first
                      << ", want " << want_first;
}

bool has_avx512() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

// Below kStreamingBytes: the element loops, for every input count the
// register kernel takes too.
TEST(Reduce, ElementLoopsMatchTheDefinitionBitForBit) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
      for (int k : {1, 2, 3, 5})
        check_reduction(dtype, op, k, k, 20011, dtype_bits(dtype) / 8, false);
      check_reduction(dtype, op, 2, 2, 20011, 0, true);
    }
  }
}

// From kStreamingBytes on: the AVX-512 register kernel for the aligned middle
// (streaming out of place, cached in place), the element loops for the edges.
TEST(Reduce, RegisterKernelMatchesTheDefinitionBitForBit) {
  if (!has_avx512())
    GTEST_SKIP() << "this processor has no AVX-512: large reductions use the "
                    "element loops, which ElementLoopsMatch... covers";
  for (DType dtype : {DType::f32, DType::bf16}) {
    const int64_t elem = dtype_bits(dtype) / 8;
    const int64_t count = kStreamingBytes / elem + 37;  // odd: a ragged tail
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
      for (int k : {1, 2, 3, 5}) check_reduction(dtype, op, k, k, count, elem, false);
      check_reduction(dtype, op, 2, 2, count, 0, false);
      check_reduction(dtype, op, 2, 2, count, 6 * elem, false);
      check_reduction(dtype, op, 2, 2, count, elem, true);
      check_reduction(dtype, op, 3, 3, count, 0, true);
    }
    // avg over a divisor other than the input count: exact reciprocals
    // (2, 4, 8) multiply, others divide.
    for (int divisor : {2, 4, 8, 6})
      check_reduction(dtype, ReduceOp::avg, 3, divisor, count, 0, false);
  }
}

// f64 and i64 combine in their own type, in input order, over several blocks,
// with the output one of the inputs: i64 keeps values past 2^53, wraps around
// on overflow and averages with truncation toward zero; f64 keeps bits f32
// would lose and lets NaN win a max.
TEST(Reduce, WideTypesCombineInTheirOwnType) {
  const int64_t count = 2 * 2048 + 5;
  const int k = 3;
  {
    std::vector<std::vector<int64_t>> in(k, std::vector<int64_t>(count));
    for (int j = 0; j < k; ++j)
      for (int64_t i = 0; i < count; ++i)
        in[j][i] = (i % 2 ? -1 : 1) * ((int64_t{1} << 56) + 3 * j + i);
    in[1][7] = std::numeric_limits<int64_t>::max();  // wraps: max + (2^56 + 7) + (2^56 + 13)
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
      std::vector<std::vector<int64_t>> bufs = in;
      std::vector<const void*> ptrs;
      for (auto& b : bufs) ptrs.push_back(b.data());
      reduce_buffers(DType::i64, op, bufs[0].data(), ptrs, count, k);
      for (int64_t i = 0; i < count; ++i) {
        uint64_t sum = 0;
        int64_t max = in[0][i];
        for (int j = 0; j < k; ++j) {
          sum += static_cast<uint64_t>(in[j][i]);
          max = std::max(max, in[j][i]);
        }
        const int64_t want = op == ReduceOp::max   ? max
                             : op == ReduceOp::sum ? static_cast<int64_t>(sum)
                                                   : static_cast<int64_t>(sum) / k;
        ASSERT_EQ(bufs[0][i], want) << "i64 " << reduce_op_name(op) << " at " << i;
      }
    }
  }
  {
    std::vector<std::vector<double>> in(k, std::vector<double>(count));
    for (int j = 0; j < k; ++j)
      for (int64_t i = 0; i < count; ++i) in[j][i] = 1.0 + std::ldexp(3.0 * j + i, -40);
    in[2][9] = std::nan("");
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
      std::vector<std::vector<double>> bufs = in;
      std::vector<const void*> ptrs;
      for (auto& b : bufs) ptrs.push_back(b.data());
      reduce_buffers(DType::f64, op, bufs[0].data(), ptrs, count, k);
      for (int64_t i = 0; i < count; ++i) {
        double acc = in[0][i];
        for (int j = 1; j < k; ++j)
          acc = op == ReduceOp::max ? ((in[j][i] > acc || std::isnan(in[j][i])) ? in[j][i] : acc)
                                    : acc + in[j][i];
        if (op == ReduceOp::avg) acc /= k;
        if (std::isnan(acc)) {
          ASSERT_TRUE(std::isnan(bufs[0][i])) << "f64 " << reduce_op_name(op) << " at " << i;
        } else {
          ASSERT_EQ(bufs[0][i], acc) << "f64 " << reduce_op_name(op) << " at " << i;
        }
      }
    }
  }
}

TEST(Reduce, MisalignedBuffersAreRejected) {
  std::vector<uint16_t> a(64), b(64);
  const void* inputs[] = {a.data(), b.data()};
  void* odd = reinterpret_cast<char*>(a.data()) + 1;
  EXPECT_THROW(reduce_buffers(DType::bf16, ReduceOp::sum, odd, inputs, 8, 2), Error);
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
      for (size_t i = 0; i < d * 5; ++i) EXPECT_EQ(dsts[d][i], 0) << "wrote before the start";
      EXPECT_EQ(dsts[d][d * 5 + static_cast<size_t>(bytes)], 0) << "wrote past the end";
    }
    std::vector<char> one(static_cast<size_t>(bytes));
    copy_buffer(one.data(), src.data(), bytes);
    EXPECT_EQ(one, src);
  }
}

}  // namespace
}  // namespace weft::comm::detail
