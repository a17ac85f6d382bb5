#include "weft/kernels/cast.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "testing.h"
#include "weft/kernels/random.h"

// The block kernels of kernels/cpu/cast_blocks.h compiled for AVX2 alone, in
// a namespace of their own: the library dispatches to its best variant
// (AVX-512 here), so the AVX2 one is checked against it directly on any x86
// machine that has AVX2.
#if defined(__x86_64__)
#if !defined(WEFT_NO_MULTIVERSIONING)  // sanitizer builds define it already
#define WEFT_NO_MULTIVERSIONING 1
#define WEFT_CAST_TEST_OWNS_NO_MULTIVERSIONING 1
#endif
#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace cast_avx2 {
using namespace ::weft;  // NOLINT: the header names weft's types unqualified
// NOLINTNEXTLINE(bugprone-suspicious-include)
#include "weft/kernels/cpu/cast_blocks.h"
}  // namespace cast_avx2
#pragma GCC pop_options
#if defined(WEFT_CAST_TEST_OWNS_NO_MULTIVERSIONING)
#undef WEFT_NO_MULTIVERSIONING
#undef WEFT_CAST_TEST_OWNS_NO_MULTIVERSIONING
#endif
#define WEFT_CAST_AVX2_VARIANT 1
#endif

namespace weft::kernels {
namespace {

const ExecContext& ec = ExecContext::host();

// ---- a naive reference quantizer over dtype.h's scalar converters ----------

uint8_t encode(DType t, float v) {
  switch (t) {
    case DType::e4m3: return f32_to_e4m3(v);
    case DType::e5m2: return f32_to_e5m2(v);
    default: return f32_to_e2m1(v);
  }
}
float decode(DType t, uint8_t c) {
  switch (t) {
    case DType::e4m3: return e4m3_to_f32(c);
    case DType::e5m2: return e5m2_to_f32(c);
    default: return e2m1_to_f32(c);
  }
}

// MXFP8's exponent as the OCP MX spec and TE state it, written differently
// from the kernel: the smallest e with 2^(e-127) >= amax / fp8_max.
uint8_t mx_exponent(float amax, DType t) {
  const float v = amax * (1.0f / dtype_max(t));
  if (v == 0.0f) return 0;
  int e = 0;
  while (e < 254 && std::ldexp(1.0, e - 127) < static_cast<double>(v)) ++e;
  return static_cast<uint8_t>(e);
}

struct Ref {
  std::vector<uint8_t> codes;   // one per element (rows x cols)
  std::vector<uint8_t> scales;  // block scale codes
  std::vector<float> values;    // the dequantized values
};

// x (rows, cols) row-wise under `mode`, the scale of per-tensor scaling `scale`.
Ref reference(const std::vector<float>& x, int64_t rows, int64_t cols, ScalingMode mode, DType t,
              float scale, float global_amax) {
  Ref r;
  r.codes.resize(x.size());
  r.values.resize(x.size());
  const Shape ss = scale_shape(mode, rows, cols);
  r.scales.assign(static_cast<size_t>(ss.numel()), 0);
  const int64_t bc = scaling_block_cols(mode), br = scaling_block_rows(mode);
  float g = 0;
  for (float v : x) g = std::max(g, std::fabs(v));
  if (global_amax >= 0) g = global_amax;
  const float s_enc = g > 0 ? 448.0f * 6.0f / g : 1.0f;
  const float s_dec = 1.0f / s_enc;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const size_t k = static_cast<size_t>(i * cols + j);
      if (mode == ScalingMode::tensor) {
        r.codes[k] = encode(t, x[k] * scale);
        r.values[k] = decode(t, r.codes[k]) * (1.0f / scale);
        continue;
      }
      // The block of (i, j): rows [bi*br, ..), cols [bj*bc, ..).
      const int64_t bi = i / br, bj = j / bc;
      float bamax = 0;
      for (int64_t a = bi * br; a < std::min(rows, bi * br + br); ++a) {
        for (int64_t b = bj * bc; b < std::min(cols, bj * bc + bc); ++b) {
          bamax = std::max(bamax, std::fabs(x[static_cast<size_t>(a * cols + b)]));
        }
      }
      const size_t si = static_cast<size_t>(bi * ss[1] + bj);
      if (mode == ScalingMode::block_1x32) {
        const uint8_t e = mx_exponent(bamax, t);
        r.scales[si] = e;
        const float mul = e == 0 ? 1.0f : static_cast<float>(std::ldexp(1.0, 127 - e));
        r.codes[k] = encode(t, x[k] * mul);
        r.values[k] = decode(t, r.codes[k]) * e8m0_to_f32(e);
      } else {
        const uint8_t sc = f32_to_e4m3(bamax / 6.0f * s_enc);
        r.scales[si] = sc;
        const float mul = std::min(1.0f / (e4m3_to_f32(sc) * s_dec), FLT_MAX);
        r.codes[k] = encode(t, x[k] * mul);
        r.values[k] = decode(t, r.codes[k]) * e4m3_to_f32(sc) * s_dec;
      }
    }
  }
  return r;
}

std::vector<uint8_t> codes_of(const Tensor& data, DType t, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(data.raw());
  std::vector<uint8_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    out[static_cast<size_t>(i)] = t == DType::e2m1 ? (p[i / 2] >> ((i % 2) * 4)) & 0xf : p[i];
  }
  return out;
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw());
  return {p, p + t.nbytes()};
}

std::vector<float> transpose(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> t(x.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      t[static_cast<size_t>(j * rows + i)] = x[static_cast<size_t>(i * cols + j)];
  return t;
}

// Values spanning many binades, so that blocks get different scales: block
// b of a row is scaled by 2^(3b - 20), with a few exact ties and specials.
std::vector<float> spread_values(int64_t rows, int64_t cols, uint32_t seed, int64_t block) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const int e = static_cast<int>((j / block + i) % 12) * 3 - 20;
      v[static_cast<size_t>(i * cols + j)] = std::ldexp(dist(gen), e);
    }
  return v;
}

void expect_matches_reference(const std::vector<float>& x, int64_t rows, int64_t cols,
                              ScalingMode mode, DType t, float scale = 1.0f,
                              float global_amax = -1.0f) {
  SCOPED_TRACE(::testing::Message() << scaling_mode_name(mode) << " " << dtype_name(t) << " ("
                                    << rows << ", " << cols << ")");
  const Tensor xt = Tensor::from({rows, cols}, x);
  QuantizedTensor q;
  quantize(ec, xt,
           {.mode = mode,
            .dtype = t,
            .rowwise = true,
            .columnwise = true,
            .scale = scale,
            .global_amax = global_amax},
           q);
  const Ref r = reference(x, rows, cols, mode, t, scale, global_amax);
  EXPECT_EQ(codes_of(q.data, t, rows * cols), r.codes);
  if (mode != ScalingMode::tensor) {
    EXPECT_EQ(bytes_of(q.scale_inv), r.scales);
  }
  Tensor back = Tensor::empty({rows, cols});
  dequantize(ec, q, false, back);
  EXPECT_EQ(back.to_vector(), r.values);
  // The column-wise copy: xᵀ quantized row-wise (16x16: the same tiles).
  const std::vector<float> xt_t = transpose(x, rows, cols);
  const ScalingMode col_mode = mode;
  const Ref rc =
      reference(xt_t, cols, rows, col_mode, t, scale,
                mode == ScalingMode::tensor ? -1.0f : (global_amax >= 0 ? global_amax : -1.0f));
  EXPECT_EQ(codes_of(q.col_data, t, rows * cols), rc.codes);
  if (mode != ScalingMode::tensor) {
    EXPECT_EQ(bytes_of(q.col_scale_inv), rc.scales);
  }
  // Dequantized back into x's layout.
  Tensor back_t = Tensor::empty({rows, cols});
  dequantize(ec, q, true, back_t);
  EXPECT_EQ(back_t.to_vector(), transpose(rc.values, cols, rows));
  if (mode == ScalingMode::tensor || mode == ScalingMode::block_16x16) {
    // One scale for both directions: the copies hold the same values.
    EXPECT_EQ(back_t.to_vector(), back.to_vector());
  }
  float amax = 0;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  EXPECT_EQ(q.amax, amax);
}

// Every code of the format, the midpoints between neighbours (ties), a hair
// either side of them, beyond the largest value, Inf, f32 subnormals and 0.
std::vector<float> format_edges(DType t) {
  std::vector<float> v;
  const int codes = t == DType::e2m1 ? 8 : 128;
  std::vector<float> mags;
  for (int c = 0; c < codes; ++c) {
    const float m = decode(t, static_cast<uint8_t>(c));
    if (std::isfinite(m)) mags.push_back(m);
  }
  for (size_t i = 0; i < mags.size(); ++i) {
    v.push_back(mags[i]);
    if (i + 1 < mags.size()) {
      const float mid = (mags[i] + mags[i + 1]) / 2;
      v.push_back(mid);
      v.push_back(std::nextafter(mid, 0.0f));
      v.push_back(std::nextafter(mid, 1e30f));
    }
  }
  const float mx = dtype_max(t);
  for (float f : {mx * 1.0625f, mx * 2, 1e30f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::denorm_min(), 1e-40f, 0.0f}) {
    v.push_back(f);
  }
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(-v[i]);
  if (v.size() % 2) v.push_back(0.5f);
  return v;
}

TEST(Cast, PerTensorEncodesLikeTheDtypeConvertersAtEveryEdge) {
  for (DType t : {DType::e4m3, DType::e5m2}) {
    std::vector<float> x = format_edges(t);
    x.push_back(std::numeric_limits<float>::quiet_NaN());
    if (x.size() % 2) x.push_back(1.0f);
    const auto n = static_cast<int64_t>(x.size());
    QuantizedTensor q;
    quantize(ec, Tensor::from({2, n / 2}, x), {.dtype = t, .scale = 1.0f}, q);
    const std::vector<uint8_t> got = codes_of(q.data, t, n);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(got[static_cast<size_t>(i)], encode(t, x[static_cast<size_t>(i)]))
          << dtype_name(t) << " " << x[static_cast<size_t>(i)];
    }
    EXPECT_TRUE(std::isnan(q.amax));
  }
}

TEST(Cast, RandomBitPatternsEncodeLikeTheDtypeConverters) {
  std::mt19937 gen(7);
  std::vector<float> x(1 << 16);
  for (float& v : x) {
    uint32_t u = gen();
    std::memcpy(&v, &u, 4);
    if (std::isnan(v)) v = 1.0f;
  }
  for (DType t : {DType::e4m3, DType::e5m2}) {
    for (float scale : {1.0f, 0x1p-100f, 0x1p100f}) {
      QuantizedTensor q;
      quantize(ec, Tensor::from({256, 256}, x), {.dtype = t, .scale = scale}, q);
      const std::vector<uint8_t> got = codes_of(q.data, t, 1 << 16);
      int bad = 0;
      for (size_t i = 0; i < x.size(); ++i) bad += got[i] != encode(t, x[i] * scale);
      EXPECT_EQ(bad, 0) << dtype_name(t) << " scale " << scale;
    }
  }
}

TEST(Cast, Fp4EdgesThroughUnitScales) {
  // A per-tensor amax of 2688 = 448 · 6 makes the second-level scale 1, and a
  // block holding a 6 gets the block scale 1: pin one in every block of 16,
  // so that each element is encoded at unit scale.
  std::vector<float> x;
  for (float v : format_edges(DType::e2m1)) {
    if (!(std::fabs(v) <= 6.0f)) continue;
    if (x.size() % 16 == 0) x.push_back(6.0f);
    x.push_back(v);
  }
  while (x.size() % 32) x.push_back(0.0f);
  const auto n = static_cast<int64_t>(x.size());
  expect_matches_reference(x, 2, n / 2, ScalingMode::block_1x16, DType::e2m1, 1.0f, 2688.0f);
}

TEST(Cast, BlockScalesAtBoundariesAndRaggedTails) {
  struct Case {
    ScalingMode mode;
    DType t;
    int64_t rows, cols;
  };
  const Case cases[] = {
      {ScalingMode::block_1x32, DType::e4m3, 3, 70},
      {ScalingMode::block_1x32, DType::e5m2, 33, 64},
      {ScalingMode::block_1x32, DType::e4m3, 65, 31},
      {ScalingMode::block_1x32, DType::e4m3, 1, 1},
      {ScalingMode::block_1x16, DType::e2m1, 4, 18},
      {ScalingMode::block_1x16, DType::e2m1, 34, 48},
      {ScalingMode::block_16x16, DType::e2m1, 34, 50},
      {ScalingMode::block_16x16, DType::e2m1, 16, 16},
      {ScalingMode::tensor, DType::e4m3, 37, 29},
      {ScalingMode::tensor, DType::e5m2, 8, 130},
  };
  for (const Case& c : cases) {
    const std::vector<float> x = spread_values(c.rows, c.cols, 11, scaling_block_cols(c.mode) + 3);
    const float scale = c.mode == ScalingMode::tensor ? 0x1p10f : 1.0f;
    expect_matches_reference(x, c.rows, c.cols, c.mode, c.t, scale);
  }
  // NVFP4 with a group's amax larger than this shard's.
  const std::vector<float> x = spread_values(32, 32, 5, 16);
  expect_matches_reference(x, 32, 32, ScalingMode::block_1x16, DType::e2m1, 1.0f, 1e3f);
}

// Random f32 bit patterns with exponents in [-40, 40], FLT_MAX and zeros
// sprinkled in (Inf and NaN: the edge tests): every block path (whole blocks and ragged tails, row-
// and column-wise) against the reference.
std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) {
    const uint32_t u = gen();
    const uint32_t e = 127 - 40 + (u >> 8) % 81;
    v = std::bit_cast<float>((u & 0x807fffffu) | (e << 23));
    if (u % 97 == 0) v = std::copysign(FLT_MAX, v);
    if (u % 89 == 0) v = 0.0f;
  }
  return x;
}

TEST(Cast, BlockModesMatchTheReferenceOnRandomValues) {
  struct Case {
    ScalingMode mode;
    DType t;
    int64_t rows, cols;
  };
  const Case cases[] = {
      {ScalingMode::block_1x32, DType::e4m3, 40, 200},
      {ScalingMode::block_1x32, DType::e5m2, 64, 160},
      {ScalingMode::block_1x32, DType::e4m3, 129, 35},
      {ScalingMode::block_1x16, DType::e2m1, 48, 88},
      {ScalingMode::block_1x16, DType::e2m1, 130, 64},
      {ScalingMode::block_16x16, DType::e2m1, 50, 96},
      {ScalingMode::block_16x16, DType::e2m1, 256, 40},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(scaling_mode_name(c.mode));
    const std::vector<float> x = random_values(c.rows * c.cols, seed++);
    expect_matches_reference(x, c.rows, c.cols, c.mode, c.t, 1.0f);
    // The same with a group amax far above this tensor's (NVFP4).
    if (c.t == DType::e2m1) expect_matches_reference(x, c.rows, c.cols, c.mode, c.t, 1.0f, 1e30f);
  }
}

TEST(Cast, NaNInAWholeBlockPoisonsOnlyItsBlock) {
  std::vector<float> x = spread_values(2, 64, 3, 32);
  x[5] = std::numeric_limits<float>::quiet_NaN();  // block 0 of row 0
  QuantizedTensor q;
  quantize(ec, Tensor::from({2, 64}, x), {.mode = ScalingMode::block_1x32, .dtype = DType::e4m3},
           q);
  const std::vector<uint8_t> sc = bytes_of(q.scale_inv);
  EXPECT_EQ(sc[0], 0xff);
  for (size_t b = 1; b < sc.size(); ++b) {
    float m = 0;
    for (size_t i = b * 32; i < b * 32 + 32; ++i) m = std::max(m, std::fabs(x[i]));
    EXPECT_EQ(sc[b], mx_exponent(m, DType::e4m3)) << b;
  }
  EXPECT_EQ(codes_of(q.data, DType::e4m3, 128)[5] & 0x7f, 0x7f);
  // NVFP4: the NaN block's scale code is NaN, and its codes all +6 (e2m1 has no NaN).
  QuantizedTensor n;
  quantize(ec, Tensor::from({2, 64}, x),
           {.mode = ScalingMode::block_1x16, .dtype = DType::e2m1, .global_amax = 100.0f}, n);
  EXPECT_EQ(bytes_of(n.scale_inv)[0] & 0x7f, 0x7f);
  const std::vector<uint8_t> codes = codes_of(n.data, DType::e2m1, 128);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(codes[static_cast<size_t>(i)], 0x7) << i;
  const Ref r = reference(std::vector<float>(x.begin() + 16, x.end()), 1, 112,
                          ScalingMode::block_1x16, DType::e2m1, 1.0f, 100.0f);
  EXPECT_EQ(std::vector<uint8_t>(codes.begin() + 16, codes.end()), r.codes);
}

// e2m1 stochastic rounding as the spec states it (a scalar, branchy rule).
uint8_t e2m1_stochastic_ref(float v, float u) {
  if (std::isnan(v)) return 0x7;
  const uint8_t sign = std::signbit(v) ? 0x8 : 0x0;
  const float a = std::fabs(v);
  if (a >= 6.0f) return sign | 0x7;
  const float step = a < 2.0f ? 0.5f : a < 4.0f ? 1.0f : 2.0f;
  const float below = std::floor(a / step) * step;
  const float above = below + step;
  const float pick = (a - below) > u * (above - below) ? above : below;
  return sign | f32_to_e2m1(pick);
}

TEST(Cast, StochasticCodesMatchTheScalarRule) {
  const int64_t rows = 40, cols = 88;  // ragged blocks both ways
  std::vector<float> x = random_values(rows * cols, 9);
  for (size_t i = 0; i < x.size(); ++i) {
    // Mostly values near the grid (a group amax of 448·6 makes S = 1).
    // (Zeros and non-finite values have no exponent to move: ilogb gives INT_MIN.)
    if (i % 5 != 0 && std::isfinite(x[i]) && x[i] != 0.0f) {
      x[i] = std::ldexp(x[i], -std::ilogb(x[i]) + static_cast<int>(i % 4) - 1);
    }
  }
  x[7] = std::numeric_limits<float>::quiet_NaN();
  x[100] = -0.0f;
  const float g = 448.0f * 6.0f;
  QuantizeConfig cfg{.mode = ScalingMode::block_1x16,
                     .dtype = DType::e2m1,
                     .rowwise = true,
                     .columnwise = true,
                     .global_amax = g,
                     .stochastic = true,
                     .seed = 11,
                     .offset = 3};
  QuantizedTensor q;
  quantize(ec, Tensor::from({rows, cols}, x), cfg, q);
  const float s_enc = 448.0f * 6.0f / g, s_dec = 1.0f / s_enc;
  // Row-wise element (r, c) draws offset + r·cols + c; column-wise (c, r)
  // draws offset + rows·cols + c·rows + r.
  auto expect = [&](const std::vector<float>& m, int64_t nr, int64_t nc, uint64_t base,
                    const Tensor& data, const Tensor& scales) {
    const std::vector<uint8_t> got = codes_of(data, DType::e2m1, nr * nc);
    const std::vector<uint8_t> sc = bytes_of(scales);
    const int64_t scols = (nc + 15) / 16;
    int bad = 0;
    for (int64_t r = 0; r < nr; ++r) {
      for (int64_t c = 0; c < nc; ++c) {
        const uint8_t code = sc[static_cast<size_t>(r * scols + c / 16)];
        const float mul = std::min(1.0f / (e4m3_to_f32(code) * s_dec), FLT_MAX);
        const float u = uniform_at(cfg.seed, base, static_cast<uint64_t>(r * nc + c));
        const size_t k = static_cast<size_t>(r * nc + c);
        bad += got[k] != e2m1_stochastic_ref(m[k] * mul, u);
      }
    }
    EXPECT_EQ(bad, 0);
  };
  expect(x, rows, cols, cfg.offset, q.data, q.scale_inv);
  expect(transpose(x, rows, cols), cols, rows, cfg.offset + rows * cols, q.col_data,
         q.col_scale_inv);
  // The block scales themselves are the RNE ones.
  std::vector<float> finite = x;
  finite[7] = 0.0f;
  const Ref r = reference(finite, rows, cols, ScalingMode::block_1x16, DType::e2m1, 1.0f, g);
  std::vector<uint8_t> sc = bytes_of(q.scale_inv);
  EXPECT_EQ(sc[0] & 0x7f, 0x7f);  // the NaN's block
  sc[0] = r.scales[0];
  EXPECT_EQ(sc, r.scales);
}

TEST(Cast, Mxfp8ExponentRoundsUpUnlessExact) {
  // One block of 32 whose amax is `a`: the scale is the smallest power of
  // two that keeps a / scale <= 448.
  struct Case {
    float a;
    uint8_t e;
  };
  const Case cases[] = {{448.0f, 127},
                        {std::nextafter(448.0f, 1e9f), 128},
                        {224.0f, 126},
                        {300.0f, 127},
                        {0.0f, 0},
                        {448.0f * 0x1p-120f, 7},
                        {448.0f * 0x1p100f, 227},
                        {1e-38f, 0}};
  for (const Case& c : cases) {
    std::vector<float> x(32, 0.0f);
    x[5] = -c.a;
    QuantizedTensor q;
    quantize(ec, Tensor::from({1, 32}, x), {.mode = ScalingMode::block_1x32, .dtype = DType::e4m3},
             q);
    EXPECT_EQ(static_cast<const uint8_t*>(q.scale_inv.raw())[0], c.e) << c.a;
    EXPECT_EQ(static_cast<const uint8_t*>(q.scale_inv.raw())[0], mx_exponent(c.a, DType::e4m3));
  }
}

TEST(Cast, Bf16InputQuantizesAsItsF32Values) {
  const Tensor x16 = weft::testing::random_tensor({48, 64}, 3, -4.0f, 4.0f, DType::bf16);
  const Tensor x32 = x16.to(DType::f32);
  for (ScalingMode m : {ScalingMode::tensor, ScalingMode::block_1x32, ScalingMode::block_1x16}) {
    const DType t = m == ScalingMode::block_1x16 ? DType::e2m1 : DType::e4m3;
    QuantizedTensor a, b;
    const QuantizeConfig cfg{
        .mode = m, .dtype = t, .rowwise = true, .columnwise = true, .scale = 3};
    quantize(ec, x16, cfg, a);
    quantize(ec, x32, cfg, b);
    EXPECT_EQ(bytes_of(a.data), bytes_of(b.data));
    EXPECT_EQ(bytes_of(a.col_data), bytes_of(b.col_data));
    EXPECT_EQ(a.amax, b.amax);
  }
}

TEST(Cast, AmaxOfLargeTensorsAndNaN) {
  Tensor x = weft::testing::random_tensor({1000, 77}, 9);
  std::vector<float> v = x.to_vector();
  float want = 0;
  for (float f : v) want = std::max(want, std::fabs(f));
  EXPECT_EQ(amax(ec, x), want);
  v[70000] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(amax(ec, Tensor::from({1000, 77}, v))));
}

// Mean of the dequantized values of `v` (one block) over `draws` seeds.
TEST(Cast, StochasticRoundingIsUnbiasedAndReproducible) {
  // 16 elements: one 6 (pins the block scale at unit encode scale) and 15
  // copies of a value between grid points.
  const float amax = 448.0f * 6.0f;
  for (float v : {0.3f, 1.2f, 2.6f, -4.9f}) {
    std::vector<float> x(16, v);
    x[0] = 6.0f;
    const Tensor xt = Tensor::from({1, 16}, x);
    double sum = 0;
    const int draws = 4000;
    for (int d = 0; d < draws; ++d) {
      QuantizedTensor q;
      quantize(ec, xt,
               {.mode = ScalingMode::block_1x16,
                .dtype = DType::e2m1,
                .global_amax = amax,
                .stochastic = true,
                .seed = 42,
                .offset = static_cast<uint64_t>(d) * 32},
               q);
      Tensor back = Tensor::empty({1, 16});
      dequantize(ec, q, false, back);
      for (int i = 1; i < 16; ++i) sum += back.item(i);
    }
    const double mean = sum / (draws * 15.0);
    // Neighbours at most 2 apart: the standard error of the mean is below
    // 1/sqrt(60000) ≈ 0.004; RNE would be off by up to 0.1 here.
    EXPECT_NEAR(mean, v, 0.02) << v;
  }
  std::vector<float> x = spread_values(32, 64, 1, 16);
  QuantizeConfig cfg{.mode = ScalingMode::block_1x16,
                     .dtype = DType::e2m1,
                     .rowwise = true,
                     .columnwise = true,
                     .stochastic = true,
                     .seed = 7,
                     .offset = 100};
  QuantizedTensor a, b, c;
  quantize(ec, Tensor::from({32, 64}, x), cfg, a);
  quantize(ec, Tensor::from({32, 64}, x), cfg, b);
  cfg.offset += 32 * 64 * 2;
  quantize(ec, Tensor::from({32, 64}, x), cfg, c);
  EXPECT_EQ(bytes_of(a.data), bytes_of(b.data));
  EXPECT_EQ(bytes_of(a.col_data), bytes_of(b.col_data));
  EXPECT_NE(bytes_of(a.data), bytes_of(c.data));
}

TEST(Cast, HadamardLeavesTheWgradProductUnchanged) {
  // dW = dyᵀ x summed over 48 tokens; both operands transformed along the tokens.
  const int64_t tokens = 48, out = 5, in = 7;
  const Tensor dy = weft::testing::random_tensor({tokens, out}, 1);
  const Tensor x = weft::testing::random_tensor({tokens, in}, 2);
  Tensor dyt = Tensor::empty({out, tokens}), xt = Tensor::empty({in, tokens});
  hadamard16_transpose(ec, dy, 0xa5c3, dyt);
  hadamard16_transpose(ec, x, 0xa5c3, xt);
  const std::vector<float> a = dy.to_vector(), b = x.to_vector(), at = dyt.to_vector(),
                           bt = xt.to_vector();
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      double want = 0, got = 0;
      for (int64_t t = 0; t < tokens; ++t) {
        want += static_cast<double>(a[static_cast<size_t>(t * out + o)]) *
                b[static_cast<size_t>(t * in + i)];
        got += static_cast<double>(at[static_cast<size_t>(o * tokens + t)]) *
               bt[static_cast<size_t>(i * tokens + t)];
      }
      EXPECT_NEAR(got, want, 1e-5) << o << "," << i;
    }
  }
  // And it is not the identity: the transformed tensor differs from the transpose.
  EXPECT_NE(at[0], a[0]);
}

TEST(Cast, HadamardRefusesBadArgumentsAtItsEntry) {
  // Checked by kernels::hadamard16_transpose itself (the dispatch rule), before any backend.
  using weft::testing::error_of;
  Tensor out = Tensor::empty({7, 48});
  const std::string dtype = error_of([&] {
    hadamard16_transpose(ec, Tensor::zeros({48, 7}, DType::bf16), 1, out);
  });
  EXPECT_NE(dtype.find("hadamard16_transpose reads and writes f32"), std::string::npos) << dtype;
  Tensor odd_out = Tensor::empty({7, 40});
  const std::string rows = error_of([&] {
    hadamard16_transpose(ec, Tensor::zeros({40, 7}), 1, odd_out);
  });
  EXPECT_NE(rows.find("needs a multiple of 16 rows, got 40"), std::string::npos) << rows;
  Tensor small = Tensor::empty({7, 32});
  const std::string size = error_of([&] {
    hadamard16_transpose(ec, Tensor::zeros({48, 7}), 1, small);
  });
  EXPECT_NE(size.find("hadamard16_transpose writes (7, 48)"), std::string::npos) << size;
}

TEST(Cast, DequantizeChecksTheTensorAtItsEntry) {
  // The data and scales of a QuantizedTensor are checked against its mode and
  // size by kernels::dequantize, before any backend (the dispatch rule).
  using weft::testing::error_of;
  QuantizedTensor q;
  quantize(ec, weft::testing::random_tensor({4, 64}, 3),
           {.mode = ScalingMode::block_1x32, .dtype = DType::e4m3}, q);
  Tensor out = Tensor::empty({4, 64});
  dequantize(ec, q, false, out);  // as made: fine
  QuantizedTensor scales = q;
  scales.scale_inv = Tensor::zeros({4, 1}, DType::e8m0);
  const std::string s = error_of([&] { dequantize(ec, scales, false, out); });
  EXPECT_NE(s.find("scales are e8m0 [4, 1], expected e8m0 [4, 2]"), std::string::npos) << s;
  QuantizedTensor data = q;
  data.data = Tensor::zeros({4, 64}, DType::e5m2);
  const std::string d = error_of([&] { dequantize(ec, data, false, out); });
  EXPECT_NE(d.find("the row-wise data is fp8_e5m2"), std::string::npos) << d;
}

TEST(Cast, RejectsMismatchedModesAndOddFp4Rows) {
  QuantizedTensor q;
  EXPECT_THROW(quantize(ec, Tensor::zeros({2, 32}),
                        {.mode = ScalingMode::block_1x16, .dtype = DType::e4m3}, q),
               Error);
  EXPECT_THROW(quantize(ec, Tensor::zeros({2, 31}),
                        {.mode = ScalingMode::block_1x16, .dtype = DType::e2m1}, q),
               Error);
  EXPECT_THROW(quantize(ec, Tensor::zeros({2, 32}),
                        {.mode = ScalingMode::tensor, .dtype = DType::e4m3, .stochastic = true}, q),
               Error);
}

TEST(Cast, Avx2BlockKernelsMatchTheLibrary) {
#if !defined(WEFT_CAST_AVX2_VARIANT)
  GTEST_SKIP() << "not an x86 build";
#else
  if (!__builtin_cpu_supports("avx2")) GTEST_SKIP() << "no AVX2 on this processor";
  namespace k = cast_avx2::weft::kernels::cpu::cast_detail;
  const int64_t cols = 192;  // 6 blocks of 32, 12 of 16
  std::vector<float> x = random_values(cols, 5);
  x[40] = std::numeric_limits<float>::quiet_NaN();
  x[70] = std::numeric_limits<float>::infinity();
  x[150] = -std::numeric_limits<float>::infinity();
  x[3] = -0.0f;
  const Tensor xt = Tensor::from({1, cols}, x);
  auto bits = [](const std::vector<float>& v) {
    std::vector<uint32_t> b(v.size());
    std::memcpy(b.data(), v.data(), v.size() * 4);
    return b;
  };
  for (DType t : {DType::e4m3, DType::e5m2}) {
    SCOPED_TRACE(dtype_name(t));
    QuantizedTensor q;
    quantize(ec, xt, {.mode = ScalingMode::block_1x32, .dtype = t}, q);
    std::vector<uint8_t> codes(cols), scales(6);
    if (t == DType::e4m3) {
      k::mx_blocks<3, 7, 0x7e, 7, 0x7f>(x.data(), 6, 1.0f / dtype_max(t), codes.data(),
                                        scales.data());
    } else {
      k::mx_blocks<2, 15, 0x7b, 7, 0x7f>(x.data(), 6, 1.0f / dtype_max(t), codes.data(),
                                         scales.data());
    }
    EXPECT_EQ(codes, bytes_of(q.data));
    EXPECT_EQ(scales, bytes_of(q.scale_inv));
    std::vector<float> table(256), block_scale(256), out(cols);
    for (int c = 0; c < 256; ++c) {
      table[static_cast<size_t>(c)] = decode(t, static_cast<uint8_t>(c));
      block_scale[static_cast<size_t>(c)] = e8m0_to_f32(static_cast<uint8_t>(c));
    }
    k::dequant_blocks<32, false>(codes.data(), 0, table.data(), block_scale.data(), scales.data(),
                                 1.0f, 6, out.data());
    Tensor back = Tensor::empty({1, cols});
    dequantize(ec, q, false, back);
    EXPECT_EQ(bits(out), bits(back.to_vector()));
  }
  const float g = 1000.0f, s_enc = 448.0f * 6.0f / g, s_dec = 1.0f / s_enc;
  std::vector<float> enc(256), table(256), block_scale(256);
  for (int c = 0; c < 256; ++c) {
    const auto b = static_cast<uint8_t>(c);
    enc[static_cast<size_t>(c)] = std::min(1.0f / (e4m3_to_f32(b) * s_dec), FLT_MAX);
    table[static_cast<size_t>(c)] = e2m1_to_f32(b);
    block_scale[static_cast<size_t>(c)] = e4m3_to_f32(b);
  }
  for (bool stochastic : {false, true}) {
    SCOPED_TRACE(stochastic ? "stochastic" : "rne");
    QuantizedTensor q;
    quantize(ec, xt,
             {.mode = ScalingMode::block_1x16,
              .dtype = DType::e2m1,
              .global_amax = g,
              .stochastic = stochastic,
              .seed = 3,
              .offset = 5},
             q);
    std::vector<float> u(cols);
    std::vector<uint32_t> words(cols + 8);
    k::uniforms(3, 5, cols, words.data(), u.data());
    for (int64_t i = 0; i < cols; ++i) {
      ASSERT_EQ(u[static_cast<size_t>(i)], uniform_at(3, 5, static_cast<uint64_t>(i))) << i;
    }
    std::vector<uint8_t> codes(cols), scales(12), packed(cols / 2);
    k::nv_blocks(x.data(), 12, s_enc, enc.data(), nullptr, stochastic ? u.data() : nullptr,
                 codes.data(), scales.data());
    k::pack_e2m1(codes.data(), cols, packed.data());
    EXPECT_EQ(packed, bytes_of(q.data));
    EXPECT_EQ(scales, bytes_of(q.scale_inv));
    // 16x16 tiles: the scales given.
    std::vector<uint8_t> tiled(cols);
    k::nv_blocks(x.data(), 12, s_enc, enc.data(), scales.data(), stochastic ? u.data() : nullptr,
                 tiled.data(), nullptr);
    EXPECT_EQ(tiled, codes);
    std::vector<float> out(cols);
    k::dequant_blocks<16, true>(packed.data(), 0, table.data(), block_scale.data(), scales.data(),
                                s_dec, 12, out.data());
    Tensor back = Tensor::empty({1, cols});
    dequantize(ec, q, false, back);
    EXPECT_EQ(bits(out), bits(back.to_vector()));
  }
  // The stochastic rule itself on edges and random draws.
  std::mt19937 gen(3);
  int bad = 0;
  for (float v : format_edges(DType::e2m1)) {
    for (int d = 0; d < 64; ++d) {
      const float w = v * (1.0f + static_cast<float>(d) / 64.0f);
      const float uu = bits_to_uniform(static_cast<uint32_t>(gen()));
      bad += k::e2m1_stochastic(w, uu) != e2m1_stochastic_ref(w, uu);
    }
  }
  bad += k::e2m1_stochastic(std::numeric_limits<float>::quiet_NaN(), 0.5f) != 0x7;
  EXPECT_EQ(bad, 0);
#endif
}

}  // namespace
}  // namespace weft::kernels
