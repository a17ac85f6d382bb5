// The CUDA per-tensor, MXFP8 and fp8-block casts against the CPU ones (the reference, tested
// exhaustively against dtype.h in cast_test.cpp): codes bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda_testing.h"
#include "testing.h"
#include "weft/kernels/cast.h"

namespace weft::kernels {
namespace {

using weft::testing::error_of;
using weft::testing::gpu;
using weft::testing::host;

const ExecContext& cpu_ec = ExecContext::host();

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor h = host(t);
  const auto* p = static_cast<const uint8_t*>(h.raw());
  return {p, p + h.nbytes()};
}

// Equal as bits, except that any NaN equals any NaN (the GPU's NaNs are
// canonical, the CPU's keep their payload).
::testing::AssertionResult same_floats(const std::vector<float>& expected,
                                       const std::vector<float>& actual) {
  if (expected.size() != actual.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < expected.size(); ++i) {
    const float e = expected[i], a = actual[i];
    if (std::isnan(e) && std::isnan(a)) continue;
    if (std::bit_cast<uint32_t>(e) != std::bit_cast<uint32_t>(a)) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << a << ", expected " << e;
    }
  }
  return ::testing::AssertionSuccess();
}

bool same_float(float e, float a) {
  return (std::isnan(e) && std::isnan(a)) ||
         std::bit_cast<uint32_t>(e) == std::bit_cast<uint32_t>(a);
}

// The edge cases of both formats (NaN, ±Inf, ±0, beyond 448 and 57344, ties,
// fp8 and f32 subnormals), with their negatives, then values spread over
// many binades.
std::vector<float> special_values(int64_t n, uint32_t seed) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> base = {
      0.0f,     nan,      inf,      448.0f,       449.0f,    464.0f,   465.0f,   480.0f,
      500.0f,   1e6f,     3.4e38f,  57344.0f,     57345.0f,  61439.0f, 61440.0f, 65536.0f,
      1e10f,    0x1p-6f,  0x1p-7f,  0x1p-9f,      0x1p-10f,  0x3p-11f, 0x5p-11f, 0x1.8p-9f,
      0x1p-14f, 0x1p-16f, 0x1p-17f, 0x3p-18f,     0x1p-18f,  1e-40f,   1e-45f,   1.0f,
      1.0625f,  1.1875f,  1.125f,   17.0f,        0.3f,      240.0f,   248.0f,   232.0f,
      40960.0f, 45056.0f, 53248.0f, 0x1.ffffp-7f, 0x1.fp-7f, 3.0f,     7.0f,     0.0009765625f};
  std::vector<float> v;
  for (float b : base) {
    v.push_back(b);
    v.push_back(-b);
  }
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> mant(-2.0f, 2.0f);
  std::uniform_int_distribution<int> exp(-24, 20);
  while (static_cast<int64_t>(v.size()) < n) v.push_back(std::ldexp(mant(gen), exp(gen)));
  v.resize(static_cast<size_t>(n));
  std::shuffle(v.begin(), v.end(), gen);
  return v;
}

void check_quantize(int64_t rows, int64_t cols, DType in, DType fp8, float scale, bool rowwise,
                    bool columnwise, ScalingMode mode = ScalingMode::tensor) {
  SCOPED_TRACE(::testing::Message()
               << rows << "x" << cols << " " << dtype_name(in) << " -> " << dtype_name(fp8) << " "
               << scaling_mode_name(mode) << " scale " << scale << " rowwise " << rowwise
               << " columnwise " << columnwise);
  const ExecContext ec = ExecContext::cuda(0);
  const Tensor x = Tensor::from({rows, cols}, special_values(rows * cols, 3), in);
  const QuantizeConfig cfg{
      .mode = mode, .dtype = fp8, .rowwise = rowwise, .columnwise = columnwise, .scale = scale};
  QuantizedTensor q, g;
  quantize(cpu_ec, x, cfg, q);
  quantize(ec, gpu(x), cfg, g);
  EXPECT_TRUE(same_float(q.amax, g.amax)) << q.amax << " vs " << g.amax;
  EXPECT_EQ(q.tensor_scale_inv, g.tensor_scale_inv);
  EXPECT_EQ(g.rows, rows);
  EXPECT_EQ(g.cols, cols);
  ASSERT_EQ(g.has_rowwise(), rowwise);
  ASSERT_EQ(g.has_columnwise(), columnwise);
  for (const bool col : {false, true}) {
    if (!(col ? columnwise : rowwise)) continue;
    SCOPED_TRACE(col ? "column-wise" : "row-wise");
    const Tensor& cd = col ? q.col_data : q.data;
    const Tensor& gd = col ? g.col_data : g.data;
    EXPECT_TRUE(gd.device().is_cuda());
    EXPECT_EQ(gd.shape(), cd.shape());
    const std::vector<uint8_t> gb = bytes_of(gd), cb = bytes_of(cd);
    ASSERT_EQ(gb.size(), cb.size());
    const std::vector<float> input = x.to_vector();
    for (size_t i = 0; i < gb.size(); ++i) {
      // Element i of the column-wise copy is x[i % rows][i / rows].
      const size_t src = col ? (i % static_cast<size_t>(rows)) * static_cast<size_t>(cols) +
                                   i / static_cast<size_t>(rows)
                             : i;
      ASSERT_EQ(static_cast<int>(gb[i]), static_cast<int>(cb[i]))
          << "code " << i << " of " << gb.size() << ", input " << input[src] << " (bits 0x"
          << std::hex << std::bit_cast<uint32_t>(input[src]) << std::dec << ")";
    }
    EXPECT_EQ(bytes_of(col ? g.col_scale_inv : g.scale_inv),
              bytes_of(col ? q.col_scale_inv : q.scale_inv));
    Tensor back = Tensor::empty({rows, cols});
    dequantize(cpu_ec, q, col, back);
    Tensor g_back = ec.empty({rows, cols});
    dequantize(ec, g, col, g_back);
    EXPECT_TRUE(same_floats(back.to_vector(), host(g_back).to_vector()));
  }
}

TEST(CudaCast, PerTensorCodesMatchCpuBitForBit) {
  WEFT_REQUIRE_GPU();
  for (DType fp8 : {DType::e4m3, DType::e5m2}) {
    for (float scale : {1.0f, 0.37f, 3.5f}) {
      check_quantize(37, 45, DType::f32, fp8, scale, true, true);
      check_quantize(96, 256, DType::f32, fp8, scale, true, true);
    }
    check_quantize(37, 45, DType::bf16, fp8, 1.0f, true, true);
    check_quantize(130, 67, DType::bf16, fp8, 0.5f, true, true);
    check_quantize(33, 65, DType::f32, fp8, 2.0f, false, true);
    check_quantize(33, 65, DType::f32, fp8, 2.0f, true, false);
  }
}

// MXFP8: 1x32 blocks with e8m0 scales, ragged edges, both copies (the
// special values put NaN and Inf into blocks: their e8m0 codes are 0xff and
// 0xfe, and a NaN block's other elements saturate or become NaN as on the CPU).
TEST(CudaCast, Mxfp8CodesMatchCpuBitForBit) {
  WEFT_REQUIRE_GPU();
  for (DType fp8 : {DType::e4m3, DType::e5m2}) {
    check_quantize(37, 45, DType::f32, fp8, 1.0f, true, true, ScalingMode::block_1x32);
    check_quantize(96, 256, DType::f32, fp8, 1.0f, true, true, ScalingMode::block_1x32);
    check_quantize(130, 67, DType::bf16, fp8, 1.0f, true, true, ScalingMode::block_1x32);
    check_quantize(33, 65, DType::f32, fp8, 1.0f, false, true, ScalingMode::block_1x32);
    check_quantize(33, 65, DType::f32, fp8, 1.0f, true, false, ScalingMode::block_1x32);
  }
}

// fp8-block: 1x128 blocks and 128x128 tiles, ragged edges, both copies, f32
// and bf16 inputs (the special values put NaN, Inf, saturating and
// subnormal elements into blocks).
TEST(CudaCast, Fp8BlockCodesMatchCpuBitForBit) {
  WEFT_REQUIRE_GPU();
  for (ScalingMode mode : {ScalingMode::block_1x128, ScalingMode::block_128x128}) {
    for (DType fp8 : {DType::e4m3, DType::e5m2}) {
      check_quantize(37, 45, DType::f32, fp8, 1.0f, true, true, mode);
      check_quantize(130, 257, DType::f32, fp8, 1.0f, true, true, mode);
      check_quantize(256, 384, DType::bf16, fp8, 1.0f, true, true, mode);
      check_quantize(1, 5, DType::f32, fp8, 1.0f, true, true, mode);
      check_quantize(300, 130, DType::f32, fp8, 1.0f, false, true, mode);
      check_quantize(300, 130, DType::bf16, fp8, 1.0f, true, false, mode);
    }
  }
  // Zero and random blocks: the scales are the CPU's powers of two.
  const ExecContext ec = ExecContext::cuda(0);
  std::vector<float> v = weft::testing::random_tensor({256, 256}, 4, -3.0f, 3.0f).to_vector();
  std::fill(v.begin(), v.begin() + 128, 0.0f);
  const Tensor x = Tensor::from({256, 256}, v);
  QuantizedTensor q, g;
  const QuantizeConfig cfg{.mode = ScalingMode::block_1x128, .rowwise = true, .columnwise = true};
  quantize(cpu_ec, x, cfg, q);
  quantize(ec, gpu(x), cfg, g);
  EXPECT_EQ(host(g.scale_inv).item(0), 1.0f);
  EXPECT_EQ(bytes_of(g.scale_inv), bytes_of(q.scale_inv));
  EXPECT_EQ(bytes_of(g.col_scale_inv), bytes_of(q.col_scale_inv));
  EXPECT_EQ(g.amax, q.amax);
}

// The amax accumulator (delayed scaling's record without a host read): each
// mode folds the amax on the stream, as a running max; a NaN amax changes
// nothing; want_amax false leaves q.amax NaN.
TEST(CudaCast, AmaxAccumulatorFoldsOnTheStream) {
  WEFT_REQUIRE_GPU();
  const ExecContext ec = ExecContext::cuda(0);
  Tensor acc = Tensor::zeros({3}, DType::i32, ec.device());
  std::vector<float> v = weft::testing::random_tensor({64, 128}, 3, -2.0f, 2.0f).to_vector();
  v[77] = 9.5f;
  const Tensor x = gpu(Tensor::from({64, 128}, v));
  for (ScalingMode m : {ScalingMode::tensor, ScalingMode::block_1x32, ScalingMode::block_1x128}) {
    QuantizedTensor q;
    QuantizeConfig cfg{.mode = m,
                       .dtype = DType::e4m3,
                       .rowwise = m != ScalingMode::tensor,
                       .columnwise = m == ScalingMode::tensor};
    cfg.want_amax = false;
    cfg.amax_accumulator = acc;
    cfg.amax_slot = 1;
    quantize(ec, x, cfg, q);
    EXPECT_TRUE(std::isnan(q.amax));
  }
  v[5] = std::numeric_limits<float>::quiet_NaN();
  QuantizedTensor q;
  QuantizeConfig cfg{.mode = ScalingMode::tensor, .dtype = DType::e4m3};
  cfg.amax_accumulator = acc;
  cfg.amax_slot = 1;
  quantize(ec, gpu(Tensor::from({64, 128}, v)), cfg, q);
  EXPECT_TRUE(std::isnan(q.amax));
  const Tensor h = host(acc);
  const auto* bits = static_cast<const uint32_t*>(h.raw());
  EXPECT_EQ(bits[0], 0u);
  EXPECT_EQ(accumulated_amax(bits[1]), 9.5f);
  EXPECT_EQ(bits[2], 0u);
}

TEST(CudaCast, AmaxMatchesCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext ec = ExecContext::cuda(0);
  for (DType in : {DType::f32, DType::bf16}) {
    std::vector<float> v = weft::testing::random_tensor({1000, 77}, 9, -3.0f, 3.0f).to_vector();
    v[4321] = -17.5f;
    const Tensor x = Tensor::from({1000, 77}, v, in);
    EXPECT_EQ(amax(ec, gpu(x)), amax(cpu_ec, x));
    EXPECT_EQ(amax(ec, gpu(x)), 17.5f);
    v[777] = -std::numeric_limits<float>::infinity();
    EXPECT_EQ(amax(ec, gpu(Tensor::from({1000, 77}, v, in))),
              std::numeric_limits<float>::infinity());
    v[99] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(std::isnan(amax(ec, gpu(Tensor::from({1000, 77}, v, in)))));
  }
  EXPECT_EQ(amax(ec, gpu(Tensor::zeros({5}))), 0.0f);
}

// Every code of both formats decodes as on the CPU, row- and column-wise.
TEST(CudaCast, DequantizeEveryCodeMatchesCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext ec = ExecContext::cuda(0);
  for (DType fp8 : {DType::e4m3, DType::e5m2}) {
    for (float scale_inv : {1.0f, 0.125f, 3.0f}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(fp8) << " scale_inv " << scale_inv);
      Tensor codes = Tensor::empty({16, 16}, fp8);
      auto* p = static_cast<uint8_t*>(codes.raw());
      for (int i = 0; i < 256; ++i) p[i] = static_cast<uint8_t>(i);
      QuantizedTensor q;
      q.mode = ScalingMode::tensor;
      q.dtype = fp8;
      q.rows = q.cols = 16;
      q.tensor_scale_inv = scale_inv;
      q.data = q.col_data = codes;
      q.scale_inv = q.col_scale_inv = Tensor::full({1}, scale_inv);
      QuantizedTensor g = q;
      g.data = g.col_data = gpu(codes);
      g.scale_inv = g.col_scale_inv = gpu(q.scale_inv);
      for (const bool col : {false, true}) {
        Tensor back = Tensor::empty({16, 16});
        dequantize(cpu_ec, q, col, back);
        Tensor g_back = ec.empty({16, 16});
        dequantize(ec, g, col, g_back);
        EXPECT_TRUE(same_floats(back.to_vector(), host(g_back).to_vector())) << col;
      }
    }
  }
}

TEST(CudaCast, Nvfp4ModesThrowWithoutCudaKernel) {
  WEFT_REQUIRE_GPU();
  const ExecContext ec = ExecContext::cuda(0);
  const Tensor x = gpu(weft::testing::random_tensor({32, 64}, 1));
  QuantizedTensor q;
  for (ScalingMode m : {ScalingMode::block_1x16, ScalingMode::block_16x16}) {
    const std::string nv = error_of([&] { quantize(ec, x, {.mode = m, .dtype = DType::e2m1}, q); });
    EXPECT_NE(nv.find("no CUDA kernel"), std::string::npos) << nv;
  }
  const std::string sr = error_of([&] {
    quantize(ec, x, {.mode = ScalingMode::block_1x16, .dtype = DType::e2m1, .stochastic = true}, q);
  });
  EXPECT_NE(sr.find("no CUDA kernel"), std::string::npos) << sr;
  // A block-scaled tensor made on the CPU, its data moved to the GPU.
  QuantizedTensor mq;
  quantize(cpu_ec, host(x), {.mode = ScalingMode::block_1x16, .dtype = DType::e2m1}, mq);
  mq.data = gpu(mq.data);
  mq.scale_inv = gpu(mq.scale_inv);
  Tensor out = ec.empty({32, 64});
  const std::string dq = error_of([&] { dequantize(ec, mq, false, out); });
  EXPECT_NE(dq.find("no CUDA kernel"), std::string::npos) << dq;
  Tensor h = ec.empty({64, 32});
  const std::string hd = error_of([&] { hadamard16_transpose(ec, x, 0x1234, h); });
  EXPECT_NE(hd.find("no CUDA implementation"), std::string::npos) << hd;
}

}  // namespace
}  // namespace weft::kernels
