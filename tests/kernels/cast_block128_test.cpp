// fp8-block's casts (ScalingMode::block_1x128, block_128x128) against a naive
// reference over dtype.h's scalar converters, on every vector build the
// processor runs and the baseline code.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "testing.h"
#include "weft/kernels/cast.h"
#include "weft/kernels/cpu/cast_passes.h"

namespace weft::kernels {
namespace {

const ExecContext& ec = ExecContext::host();

// The power of two at or below fp8_max / amax computed in f32, by frexp
// (an independent formulation of fp8_block_scale's mantissa masking).
float ref_scale(float amax, float fmax) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return 1.0f;
  float q = fmax / amax;
  if (!std::isfinite(q)) q = FLT_MAX;
  int e = 0;
  (void)std::frexp(q, &e);  // q = f · 2^e, f in [0.5, 1)
  return std::ldexp(1.0f, e - 1);
}

uint8_t encode(DType t, float v) { return t == DType::e4m3 ? f32_to_e4m3(v) : f32_to_e5m2(v); }
float decode(DType t, uint8_t c) { return t == DType::e4m3 ? e4m3_to_f32(c) : e5m2_to_f32(c); }

float amax_of(const std::vector<float>& v) {
  float m = 0.0f;
  for (float f : v) {
    if (std::isnan(f)) return std::numeric_limits<float>::quiet_NaN();
    m = std::max(m, std::fabs(f));
  }
  return m;
}

// A (rows, cols) matrix quantized by hand: codes and decode scales, the
// blocks `br` rows by 128 columns.
struct Ref {
  std::vector<uint8_t> codes;
  std::vector<float> scale_inv;
};

Ref reference(const std::vector<float>& x, int64_t rows, int64_t cols, int64_t br, DType t) {
  const int64_t bc = 128, nbr = (rows + br - 1) / br, nbc = (cols + bc - 1) / bc;
  Ref r;
  r.codes.resize(static_cast<size_t>(rows * cols));
  r.scale_inv.resize(static_cast<size_t>(nbr * nbc));
  for (int64_t a = 0; a < nbr; ++a) {
    for (int64_t b = 0; b < nbc; ++b) {
      std::vector<float> block;
      for (int64_t i = a * br; i < std::min(rows, (a + 1) * br); ++i) {
        for (int64_t j = b * bc; j < std::min(cols, (b + 1) * bc); ++j) {
          block.push_back(x[static_cast<size_t>(i * cols + j)]);
        }
      }
      const float s = ref_scale(amax_of(block), dtype_max(t));
      r.scale_inv[static_cast<size_t>(a * nbc + b)] = 1.0f / s;
      for (int64_t i = a * br; i < std::min(rows, (a + 1) * br); ++i) {
        for (int64_t j = b * bc; j < std::min(cols, (b + 1) * bc); ++j) {
          r.codes[static_cast<size_t>(i * cols + j)] =
              encode(t, x[static_cast<size_t>(i * cols + j)] * s);
        }
      }
    }
  }
  return r;
}

std::vector<float> transposed(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> t(x.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      t[static_cast<size_t>(j * rows + i)] = x[static_cast<size_t>(i * cols + j)];
  return t;
}

std::vector<uint8_t> bytes(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw());
  return {p, p + t.nbytes()};
}
std::vector<float> floats(const Tensor& t) { return t.to_vector(); }

// Values spanning many binades, with zero blocks, subnormal-sized and huge
// entries, and (when asked) NaN and Inf.
std::vector<float> test_values(int64_t rows, int64_t cols, uint32_t seed, bool specials) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> e(-20, 20);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i) {
    const int row_exp = e(g);  // rows of different magnitudes
    for (int64_t j = 0; j < cols; ++j) {
      v[static_cast<size_t>(i * cols + j)] = std::ldexp(u(g), row_exp + (j % 7) - 3);
    }
  }
  if (rows > 2 && cols > 130) {
    for (int64_t j = 0; j < 128; ++j) v[static_cast<size_t>(1 * cols + j)] = 0.0f;  // a zero block
    v[static_cast<size_t>(2 * cols + 129)] = 3.0e38f;
    v[static_cast<size_t>(2 * cols + 5)] = 1.0e-40f;
  }
  if (specials && rows > 3 && cols > 10) {
    v[static_cast<size_t>(3 * cols + 7)] = std::numeric_limits<float>::quiet_NaN();
    v[static_cast<size_t>(3 * cols + 9)] = -std::numeric_limits<float>::infinity();
  }
  return v;
}

TEST(CastBlock128, ScaleIsThePowerOfTwoAtOrBelowMaxOverAmax) {
  EXPECT_EQ(fp8_block_scale(448.0f, 448.0f), 1.0f);
  EXPECT_EQ(fp8_block_scale(1.0f, 448.0f), 256.0f);
  EXPECT_EQ(fp8_block_scale(1.75f, 448.0f), 256.0f);  // 1.75 · 256 = 448 exactly
  EXPECT_EQ(fp8_block_scale(2.0f, 448.0f), 128.0f);   // 448 / 2 = 224: down to 128
  EXPECT_EQ(fp8_block_scale(0.0f, 448.0f), 1.0f);
  EXPECT_EQ(fp8_block_scale(std::numeric_limits<float>::infinity(), 448.0f), 1.0f);
  EXPECT_EQ(fp8_block_scale(std::numeric_limits<float>::quiet_NaN(), 448.0f), 1.0f);
  EXPECT_EQ(fp8_block_scale(1e-40f, 448.0f), std::ldexp(1.0f, 127));  // 448 / amax overflows
  std::mt19937 g(3);
  std::uniform_real_distribution<float> u(-30.0f, 30.0f);
  for (int i = 0; i < 10000; ++i) {
    const float amax = std::exp2(u(g));
    for (float fmax : {448.0f, 57344.0f}) {
      const float s = fp8_block_scale(amax, fmax);
      EXPECT_EQ(s, ref_scale(amax, fmax));
      EXPECT_LE(amax * s, fmax);        // the block's largest element never saturates
      EXPECT_GT(amax * s * 2, fmax);    // and the scale is the largest power of two that says so
      EXPECT_EQ(1.0f / (1.0f / s), s);  // decoding is exact
    }
  }
}

struct Shape2 {
  int64_t rows, cols;
};

TEST(CastBlock128, MatchesTheReferenceOnEveryBuild) {
  std::vector<VectorIsa> isas{VectorIsa::baseline};
  for (VectorIsa isa : {VectorIsa::avx2, VectorIsa::avx512}) {
    if (processor_runs(isa)) isas.push_back(isa);
  }
  for (const Shape2 sh : {Shape2{1, 5}, Shape2{3, 300}, Shape2{130, 257}, Shape2{256, 128},
                          Shape2{129, 1}, Shape2{40, 384}}) {
    for (DType t : {DType::e4m3, DType::e5m2}) {
      for (ScalingMode mode : {ScalingMode::block_1x128, ScalingMode::block_128x128}) {
        for (bool bf16 : {false, true}) {
          const std::vector<float> v = test_values(sh.rows, sh.cols, 7, !bf16);
          Tensor x = Tensor::from({sh.rows, sh.cols}, v);
          if (bf16) x = x.to(DType::bf16);
          const std::vector<float> xv = x.to(DType::f32).to_vector();
          const int64_t br = mode == ScalingMode::block_128x128 ? 128 : 1;
          const Ref rows_ref = reference(xv, sh.rows, sh.cols, br, t);
          // The column-wise copy: xᵀ quantized row-wise (128x128: the same
          // tiles, so the same codes transposed).
          const Ref cols_ref = reference(transposed(xv, sh.rows, sh.cols), sh.cols, sh.rows, br, t);
          for (VectorIsa isa : isas) {
            SCOPED_TRACE(::testing::Message()
                         << sh.rows << "x" << sh.cols << " " << dtype_name(t) << " "
                         << scaling_mode_name(mode) << (bf16 ? " bf16" : " f32") << " isa "
                         << static_cast<int>(isa));
            cpu::ScopedCastIsa forced(isa);
            QuantizedTensor q;
            QuantizeConfig cfg{.mode = mode, .dtype = t, .rowwise = true, .columnwise = true};
            quantize(ec, x, cfg, q);
            EXPECT_EQ(bytes(q.data), rows_ref.codes);
            EXPECT_EQ(floats(q.scale_inv), rows_ref.scale_inv);
            EXPECT_EQ(bytes(q.col_data), cols_ref.codes);
            EXPECT_EQ(floats(q.col_scale_inv), cols_ref.scale_inv);
            EXPECT_EQ(q.col_scale_inv.shape(), scale_shape(mode, sh.cols, sh.rows));
            const float amax = amax_of(xv);
            if (std::isnan(amax)) {
              EXPECT_TRUE(std::isnan(q.amax));
            } else {
              EXPECT_EQ(q.amax, amax);
            }
            // Row-wise only and column-wise only give the same copies.
            QuantizedTensor r, c;
            quantize(ec, x, {.mode = mode, .dtype = t, .rowwise = true, .columnwise = false}, r);
            quantize(ec, x, {.mode = mode, .dtype = t, .rowwise = false, .columnwise = true}, c);
            EXPECT_EQ(bytes(r.data), rows_ref.codes);
            EXPECT_FALSE(r.has_columnwise());
            EXPECT_EQ(bytes(c.col_data), cols_ref.codes);
            EXPECT_FALSE(c.has_rowwise());
            // Dequantized: code value times the block's decode scale, exactly,
            // in x's layout from either copy.
            for (bool col : {false, true}) {
              Tensor out = Tensor::empty({sh.rows, sh.cols});
              dequantize(ec, q, col, out);
              const std::vector<float> o = out.to_vector();
              const int64_t nbc = (sh.cols + 127) / 128, nbr = (sh.rows + 127) / 128;
              for (int64_t i = 0; i < sh.rows; ++i) {
                for (int64_t j = 0; j < sh.cols; ++j) {
                  const size_t k = static_cast<size_t>(i * sh.cols + j);
                  const float expected =
                      col ? decode(t, cols_ref.codes[static_cast<size_t>(j * sh.rows + i)]) *
                                cols_ref.scale_inv[static_cast<size_t>((j / br) * nbr + i / 128)]
                          : decode(t, rows_ref.codes[k]) *
                                rows_ref.scale_inv[static_cast<size_t>((i / br) * nbc + j / 128)];
                  if (std::isnan(expected)) {
                    EXPECT_TRUE(std::isnan(o[k]));
                  } else {
                    ASSERT_EQ(o[k], expected) << "(" << i << ", " << j << ")";
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

// Both copies of x (rows, cols) on every build, against the reference.
void expect_both_copies(const std::vector<float>& v, int64_t rows, int64_t cols, DType t,
                        ScalingMode mode) {
  const int64_t br = mode == ScalingMode::block_128x128 ? 128 : 1;
  const Ref rows_ref = reference(v, rows, cols, br, t);
  const Ref cols_ref = reference(transposed(v, rows, cols), cols, rows, br, t);
  const Tensor x = Tensor::from({rows, cols}, v);
  for (VectorIsa isa : {VectorIsa::baseline, VectorIsa::avx2, VectorIsa::avx512}) {
    if (!processor_runs(isa)) continue;
    SCOPED_TRACE(::testing::Message() << rows << "x" << cols << " " << dtype_name(t) << " "
                                      << scaling_mode_name(mode) << " on " << vector_isa_name(isa));
    cpu::ScopedCastIsa forced(isa);
    QuantizedTensor q;
    quantize(ec, x, {.mode = mode, .dtype = t, .rowwise = true, .columnwise = true}, q);
    EXPECT_EQ(bytes(q.data), rows_ref.codes);
    EXPECT_EQ(floats(q.scale_inv), rows_ref.scale_inv);
    EXPECT_EQ(bytes(q.col_data), cols_ref.codes);
    EXPECT_EQ(floats(q.col_scale_inv), cols_ref.scale_inv);
  }
}

// The vector builds move most column-wise codes from the row-wise ones by
// binades (cast_simd.h scaled_cols): rows and columns whose scales lie
// further apart than that allows, blocks whose scale bounds nothing (an amax
// of Inf, NaN or 0: scale 1, a finite element beside Inf saturating in its
// row but not in its column) and amaxes so small that fmax / amax overflows
// (scale 2^127) must be encoded from x instead, and give the same codes.
TEST(CastBlock128, ColumnCodesFromRowCodesWhereTheScalesAllow) {
  // Magnitudes within a few binades of each other, so that most groups of
  // codes move, and those with an odd one out are encoded (a move takes a
  // whole group of 64 codes, rows r, r + 16, r + 32, r + 48 of 16 columns;
  // CastBlock128.MatchesTheReferenceOnEveryBuild has rows far apart).
  const int64_t rows = 192, cols = 272;
  std::mt19937 g(5);
  std::uniform_real_distribution<float> u(0.5f, 1.0f);
  std::bernoulli_distribution negative(0.5);
  auto draw = [&](int e) { return std::ldexp(negative(g) ? -u(g) : u(g), e); };
  std::vector<float> v(static_cast<size_t>(rows * cols));
  auto at = [&](int64_t i, int64_t j) -> float& { return v[static_cast<size_t>(i * cols + j)]; };
  for (int64_t i = 0; i < rows; ++i) {
    const int e = static_cast<int>(i % 7) - 3;
    for (int64_t j = 0; j < cols; ++j) at(i, j) = draw(e + static_cast<int>(j % 5));
    at(i, 70) = draw(8);  // column 70's amax: 1000, in row 5
    at(i, 80) = draw(9);  // column 80's: -2000, in row 6
    for (int64_t j = 144; j < 160; ++j) at(i, j) = 1e-37f * u(g);  // scale 2^127
    at(i, 200) = 0.0f;                                             // a zero column
  }
  // Blocks whose scale (1) bounds nothing: a finite element saturates in its
  // row beside Inf or NaN, not in its column.
  at(5, 3) = std::numeric_limits<float>::infinity();
  at(5, 70) = 1000.0f;
  at(6, 10) = std::numeric_limits<float>::quiet_NaN();
  at(6, 80) = -2000.0f;
  for (int64_t j = 0; j < cols; ++j) {
    at(7, j) = 0.0f;           // a zero row
    at(8, j) = 1e-37f * u(g);  // scale 2^127 along row 8
  }
  // Scale 1 for Inf in rows 9 + 16q, beside the strip of columns whose scale
  // is 2^127.
  for (int64_t i = 9; i < 64; i += 16) at(i, 140) = -std::numeric_limits<float>::infinity();
  at(130, 17) = -std::numeric_limits<float>::infinity();  // in the second band
  for (DType t : {DType::e4m3, DType::e5m2}) {
    for (ScalingMode mode : {ScalingMode::block_1x128, ScalingMode::block_128x128}) {
      expect_both_copies(v, rows, cols, t, mode);
    }
  }
}

// Copies of at least cpu::kStreamBytes bytes are written past the caches
// (a row length that is not a multiple of 128: ragged blocks at each row's end).
TEST(CastBlock128, LargeCopiesWrittenPastTheCaches) {
  const int64_t rows = 4096, cols = 1056;
  ASSERT_GE(rows * cols, cpu::kStreamBytes);
  const std::vector<float> v = test_values(rows, cols, 13, true);
  for (ScalingMode mode : {ScalingMode::block_1x128, ScalingMode::block_128x128}) {
    expect_both_copies(v, rows, cols, DType::e4m3, mode);
  }
}

TEST(CastBlock128, RoundTripIsWithinHalfAnUlpOfTheBlock) {
  const int64_t rows = 64, cols = 512;
  const std::vector<float> v = test_values(rows, cols, 9, false);
  const Tensor x = Tensor::from({rows, cols}, v);
  QuantizedTensor q;
  quantize(ec, x, {.mode = ScalingMode::block_1x128, .dtype = DType::e4m3}, q);
  Tensor out = Tensor::empty({rows, cols});
  dequantize(ec, q, false, out);
  const std::vector<float> o = out.to_vector();
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t b = 0; b < cols / 128; ++b) {
      float m = 0.0f;
      for (int64_t j = b * 128; j < (b + 1) * 128; ++j)
        m = std::max(m, std::fabs(v[static_cast<size_t>(i * cols + j)]));
      if (m == 0.0f || m > 1e37f) continue;
      for (int64_t j = b * 128; j < (b + 1) * 128; ++j) {
        const size_t k = static_cast<size_t>(i * cols + j);
        // E4M3 keeps 3 mantissa bits: relative error 2^-4 for normal codes;
        // the block's smallest elements fall to subnormal codes, whose
        // spacing is 2^-9 of the scaled value's range (m·s ≥ 224).
        EXPECT_LE(std::fabs(o[k] - v[k]),
                  std::max(std::fabs(v[k]) / 16, m / 224 * std::ldexp(1.0f, -10)))
            << i << ", " << j;
      }
    }
  }
}

TEST(CastBlock128, RefusesFp4AndDescribesTheModes) {
  const Tensor x = Tensor::zeros({4, 128});
  QuantizedTensor q;
  EXPECT_THROW(quantize(ec, x, {.mode = ScalingMode::block_1x128, .dtype = DType::e2m1}, q), Error);
  EXPECT_STREQ(scaling_mode_name(ScalingMode::block_1x128), "1x128");
  EXPECT_STREQ(scaling_mode_name(ScalingMode::block_128x128), "128x128");
  EXPECT_EQ(scale_shape(ScalingMode::block_128x128, 300, 129), (Shape{3, 2}));
  EXPECT_EQ(scale_shape(ScalingMode::block_1x128, 300, 129), (Shape{300, 2}));
  EXPECT_EQ(scale_dtype(ScalingMode::block_1x128), DType::f32);
  // A zero tensor: scale 1, codes 0.
  quantize(ec, x, {.mode = ScalingMode::block_128x128, .dtype = DType::e4m3}, q);
  EXPECT_EQ(floats(q.scale_inv), std::vector<float>{1.0f});
  EXPECT_EQ(bytes(q.data), std::vector<uint8_t>(4 * 128, 0));
  EXPECT_EQ(q.amax, 0.0f);
}

}  // namespace
}  // namespace weft::kernels
