// The AVX2 and AVX-512 cast kernels (kernels/cpu/cast_simd.h) against the
// baseline code they replace, bit for bit: quantize (row-wise, column-wise,
// scales, amax, stochastic rounding on the same random stream) and
// dequantize (both directions, NaN payloads included) over dense sweeps of
// f32 bit patterns and random tensors of odd shapes. Every build the
// processor runs is forced in turn (cpu::ScopedCastIsa), whatever
// WEFT_MAX_CPU_ISA says; ctest runs the Cast suites once more capped to AVX2.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "weft/kernels/cast.h"
#include "weft/kernels/cpu/cast_passes.h"
#include "weft/kernels/cpu_support.h"
#include "weft/kernels/random.h"

namespace weft::kernels {
namespace {

const ExecContext& ec = ExecContext::host();

std::vector<uint8_t> bytes_of(const Tensor& t) {
  if (!t.defined()) return {};
  const auto* p = static_cast<const uint8_t*>(t.raw());
  return {p, p + t.nbytes()};
}

// What one quantize call and the dequantizes of its copies give.
struct Result {
  std::vector<uint8_t> data, scale_inv, col_data, col_scale_inv, back, back_col;
  uint32_t amax = 0;
  uint32_t tensor_scale_inv = 0;
};

Result dequantized(const QuantizedTensor& q, Result r) {
  if (q.data.defined()) {
    Tensor back = Tensor::empty({q.rows, q.cols});
    dequantize(ec, q, false, back);
    r.back = bytes_of(back);
  }
  if (q.col_data.defined()) {
    Tensor back = Tensor::empty({q.rows, q.cols});
    dequantize(ec, q, true, back);
    r.back_col = bytes_of(back);
  }
  return r;
}

Result run(VectorIsa isa, const Tensor& x, const QuantizeConfig& cfg) {
  cpu::ScopedCastIsa forced(isa);
  QuantizedTensor q;
  quantize(ec, x, cfg, q);
  Result r;
  r.data = bytes_of(q.data);
  r.scale_inv = bytes_of(q.scale_inv);
  r.col_data = bytes_of(q.col_data);
  r.col_scale_inv = bytes_of(q.col_scale_inv);
  r.amax = std::bit_cast<uint32_t>(q.amax);
  r.tensor_scale_inv = std::bit_cast<uint32_t>(q.tensor_scale_inv);
  return dequantized(q, r);
}

// The vector builds this processor runs (the test is void without one).
std::vector<VectorIsa> vector_builds() {
  std::vector<VectorIsa> v;
  for (VectorIsa isa : {VectorIsa::avx2, VectorIsa::avx512}) {
    if (processor_runs(isa)) v.push_back(isa);
  }
  return v;
}

#define WEFT_REQUIRE_VECTOR_BUILDS() \
  if (vector_builds().empty()) GTEST_SKIP() << "no AVX2 or AVX-512 on this machine"

// got == want, else the first differing byte and how many differ.
void expect_bytes(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t first = got.size(), count = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      first = std::min(first, i);
      ++count;
    }
  }
  EXPECT_EQ(count, 0u) << what << ": " << count << " bytes differ, the first at " << first << " ("
                       << int{got[first]} << " instead of " << int{want[first]} << ")";
}

// Each vector build gives what the baseline code gives.
void expect_same(const Tensor& x, const QuantizeConfig& cfg, const std::string& what) {
  const Result want = run(VectorIsa::baseline, x, cfg);
  for (VectorIsa isa : vector_builds()) {
    SCOPED_TRACE(what + " on " + vector_isa_name(isa));
    const Result got = run(isa, x, cfg);
    expect_bytes(got.data, want.data, "data");
    expect_bytes(got.scale_inv, want.scale_inv, "scale_inv");
    expect_bytes(got.col_data, want.col_data, "col_data");
    expect_bytes(got.col_scale_inv, want.col_scale_inv, "col_scale_inv");
    EXPECT_EQ(got.amax, want.amax);
    EXPECT_EQ(got.tensor_scale_inv, want.tensor_scale_inv);
    expect_bytes(got.back, want.back, "dequantized");
    expect_bytes(got.back_col, want.back_col, "dequantized column-wise copy");
  }
}

// Every configuration: per-tensor (fp8, several scales), MXFP8, fp8-block
// (1x128, 128x128), NVFP4 1x16 and 16x16 (own and group amax), stochastic
// NVFP4.
std::vector<std::pair<std::string, QuantizeConfig>> configs(bool rowwise, bool columnwise) {
  std::vector<std::pair<std::string, QuantizeConfig>> c;
  auto add = [&](std::string name, QuantizeConfig q) {
    q.rowwise = rowwise;
    q.columnwise = columnwise;
    c.emplace_back(std::move(name), q);
  };
  for (DType t : {DType::e4m3, DType::e5m2}) {
    for (float s : {1.0f, 0x1p-7f, 300.0f, 0x1p100f, FLT_MAX}) {
      add(std::string("tensor ") + std::string(dtype_name(t)) + " scale " + std::to_string(s),
          {.mode = ScalingMode::tensor, .dtype = t, .scale = s});
    }
    add("mxfp8 " + std::string(dtype_name(t)), {.mode = ScalingMode::block_1x32, .dtype = t});
    for (ScalingMode m : {ScalingMode::block_1x128, ScalingMode::block_128x128}) {
      add("fp8-block " + std::string(scaling_mode_name(m)) + " " + std::string(dtype_name(t)),
          {.mode = m, .dtype = t});
    }
  }
  for (ScalingMode m : {ScalingMode::block_1x16, ScalingMode::block_16x16}) {
    for (float g : {-1.0f, 1e3f, 1e30f}) {
      add(std::string(scaling_mode_name(m)) + " amax " + std::to_string(g),
          {.mode = m, .dtype = DType::e2m1, .global_amax = g});
    }
  }
  // Offsets whose Philox blocks start at each word, and straddle 2^32 blocks.
  for (uint64_t offset : {0ull, 3ull, 4097ull, (1ull << 34) - 4 * 37 - 2}) {
    add("nvfp4 stochastic offset " + std::to_string(offset), {.mode = ScalingMode::block_1x16,
                                                              .dtype = DType::e2m1,
                                                              .stochastic = true,
                                                              .seed = 0x9e3779b97f4a7c15ull,
                                                              .offset = offset});
  }
  return c;
}

// f32 bit patterns: every sign and exponent, with every value of the top 8
// mantissa bits — which holds each format's ties, normal and subnormal — and
// below them 0, 1 (just above a tie), all ones (just below the next) and two
// others. NaNs (quiet and signalling), ±Inf, f32 subnormals and zeros included.
std::vector<float> dense_sweep() {
  std::vector<float> v;
  for (uint32_t se = 0; se < 512; ++se) {
    for (uint32_t top = 0; top < 256; ++top) {
      for (uint32_t low : {0u, 1u, 0x4000u, 0x2aaau, 0x7fffu}) {
        v.push_back(std::bit_cast<float>(se << 23 | top << 15 | low));
      }
    }
  }
  return v;
}

TEST(CastSimd, DenseSweepOfF32BitPatterns) {
  WEFT_REQUIRE_VECTOR_BUILDS();
  std::vector<float> v = dense_sweep();
  const auto n = static_cast<int64_t>(v.size());
  const int64_t cols = 1024, rows = n / cols;  // 640 x 1024
  // In order, each block holds neighbouring values (the block scales sit at
  // the format's top); shuffled, blocks mix magnitudes (elements far below
  // their block's scale, in the subnormal and flushed ranges).
  std::vector<float> shuffled = v;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(5));
  for (const auto& [name, cfg] : configs(true, true)) {
    expect_same(Tensor::from({rows, cols}, v), cfg, name + ", in order");
    expect_same(Tensor::from({rows, cols}, shuffled), cfg, name + ", shuffled");
  }
}

// Magnitudes at every format's boundaries: the values of each code, the
// midpoints between neighbours and one f32 ulp either side, beyond the
// largest value, the smallest subnormals and half of them, scaled so that
// blocks of 16 and 32 keep them at unit scale (a pinned block maximum).
std::vector<float> format_boundaries() {
  std::vector<float> mags;
  for (uint32_t c = 0; c < 128; ++c) {
    for (float m : {e4m3_to_f32(static_cast<uint8_t>(c)), e5m2_to_f32(static_cast<uint8_t>(c)),
                    c < 8 ? e2m1_to_f32(static_cast<uint8_t>(c)) : 0.0f}) {
      if (std::isfinite(m)) mags.push_back(m);
    }
  }
  std::sort(mags.begin(), mags.end());
  mags.erase(std::unique(mags.begin(), mags.end()), mags.end());
  std::vector<float> v;
  for (size_t i = 0; i < mags.size(); ++i) {
    v.push_back(mags[i]);
    const float next = i + 1 < mags.size() ? mags[i + 1] : mags[i] * 2;
    const float mid = (mags[i] + next) / 2;
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, FLT_MAX)}) v.push_back(f);
  }
  for (float f : {464.0f, 480.0f, 61440.0f, 65536.0f, 7.0f, 0x1p-10f, 0x1p-17f, 0x1p-2f, FLT_MAX,
                  FLT_MIN, std::numeric_limits<float>::denorm_min()}) {
    v.push_back(f);
  }
  const size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(-v[i]);
  return v;
}

TEST(CastSimd, FormatBoundariesTiesAndSaturation) {
  WEFT_REQUIRE_VECTOR_BUILDS();
  const std::vector<float> b = format_boundaries();
  // Rows of 64: a block-pinning maximum (448 for MXFP8 e4m3 at unit scale,
  // 6 · 448 per-tensor amax for NVFP4), then boundary values.
  for (float pin : {448.0f, 57344.0f, 6.0f}) {
    std::vector<float> x;
    for (size_t i = 0; i < b.size(); ++i) {
      if (x.size() % 16 == 0) x.push_back(pin);
      x.push_back(b[i]);
    }
    while (x.size() % 128) x.push_back(0.0f);
    const auto rows = static_cast<int64_t>(x.size()) / 64;
    for (const auto& [name, cfg] : configs(true, true)) {
      QuantizeConfig c = cfg;
      if (c.dtype == DType::e2m1 && c.global_amax < 0) c.global_amax = 448.0f * 6.0f;
      expect_same(Tensor::from({rows, 64}, x), c, name + " pinned at " + std::to_string(pin));
    }
  }
}

// MXFP8 with both copies, whose column-wise codes mostly follow from the
// row-wise ones (cast_simd_tiles.inc mx_cols_t): row and column block
// scales several binades apart in both directions, magnitudes at every
// e4m3 / e5m2 boundary (the smallest normals, ties, the largest values),
// zeros, Inf and NaN (capped and NaN scales), and blocks of nothing but
// f32 subnormals or tiny normals (scale codes 0 and 1).
TEST(CastSimd, MxfpColumnCodesFromRowCodes) {
  WEFT_REQUIRE_VECTOR_BUILDS();
  // Row r's largest magnitude, 448 · 2^-(r mod 5), on the diagonal of each
  // 32x32 tile, so that its scale maps it to 448, and the rest of the row
  // ordinary values with a boundary value up to 28 here and there (one in
  // 61, so that most runs of codes follow and the boundary ones are tested),
  // all at that scale: a column's largest is its diagonal's, and the two
  // scales are up to 4 binades apart either way.
  std::vector<float> b;
  for (float v : format_boundaries()) {
    if (std::abs(v) <= 28.0f) b.push_back(v);
  }
  const int64_t rows = 192, cols = 160;
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const int scale = -static_cast<int>(r % 5);
    for (int64_t c = 0; c < cols; ++c) {
      const auto i = static_cast<size_t>(r * 131 + c * 17);
      float m = i % 61 ? 1.0f + static_cast<float>(i % 13) * 0.125f : b[i / 61 % b.size()];
      if (c % 32 == r % 32) m = r % 3 ? 448.0f : -448.0f;
      x[static_cast<size_t>(r * cols + c)] = std::ldexp(m, scale);
    }
  }
  for (int64_t r = 64; r < 96; ++r) {
    for (int64_t c = 96; c < 128; ++c) {
      x[static_cast<size_t>(r * cols + c)] =
          std::numeric_limits<float>::denorm_min() * static_cast<float>(r - c);
    }
  }
  // A tile of f32 normals so small that the rows' scale code is 1 (their
  // largest magnitudes, 2^-117.5, all in the first 16 columns) and the last
  // 16 columns' is 0 (a scale of 1, not 2^127).
  for (int64_t r = 160; r < 192; ++r) {
    for (int64_t c = 64; c < 96; ++c) {
      x[static_cast<size_t>(r * cols + c)] =
          c - 64 == (r - 160) % 16
              ? std::ldexp(1.41f, -118)
              : std::ldexp(1.0f + 0.03f * static_cast<float>((r + c) % 10), -119);
    }
  }
  x[5 * cols + 7] = std::numeric_limits<float>::infinity();
  x[70 * cols + 40] = std::numeric_limits<float>::quiet_NaN();
  x[130 * cols + 100] = -std::numeric_limits<float>::infinity();
  const Tensor t = Tensor::from({rows, cols}, x);
  for (DType d : {DType::e4m3, DType::e5m2}) {
    expect_same(t, {.mode = ScalingMode::block_1x32, .dtype = d, .columnwise = true},
                std::string("mxfp8 ") + std::string(dtype_name(d)));
  }
}

// Random f32 values over a wide range with zeros, ±FLT_MAX, ±Inf and NaN
// sprinkled in.
std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) {
    const uint32_t u = gen();
    v = std::bit_cast<float>((u & 0x807fffffu) | ((127 - 30 + (u >> 8) % 61) << 23));
    if (u % 97 == 0) v = std::copysign(FLT_MAX, v);
    if (u % 89 == 0) v = 0.0f;
    if (u % 1009 == 0) v = std::copysign(std::numeric_limits<float>::infinity(), v);
    if (u % 2003 == 0) v = std::numeric_limits<float>::quiet_NaN();
  }
  return x;
}

TEST(CastSimd, RandomTensorsOfOddShapes) {
  WEFT_REQUIRE_VECTOR_BUILDS();
  const int64_t shapes[][2] = {{1, 1},   {1, 16},  {3, 70},   {17, 33},  {16, 16},  {33, 65},
                               {64, 48}, {37, 29}, {130, 96}, {47, 158}, {96, 200}, {200, 40}};
  uint32_t seed = 1;
  for (const auto& s : shapes) {
    const int64_t rows = s[0], cols = s[1];
    const Tensor x = Tensor::from({rows, cols}, random_values(rows * cols, seed++));
    const std::string shape = "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")";
    // e2m1 packs pairs: row-wise needs an even row length, column-wise an even row count.
    for (int dir = 0; dir < 3; ++dir) {
      const bool rowwise = dir != 1, columnwise = dir != 0;
      for (const auto& [name, cfg] : configs(rowwise, columnwise)) {
        if (cfg.dtype == DType::e2m1 && ((rowwise && cols % 2) || (columnwise && rows % 2))) {
          continue;
        }
        expect_same(x, cfg, name + " " + shape + (dir == 0 ? " row" : dir == 1 ? " col" : " both"));
      }
    }
  }
}

// Copies of at least cpu::kStreamBytes of codes go past the caches: a
// tensor large enough for that in each mode (fp4 too), its rows 2064
// elements long so that some start on a cache line and some do not.
TEST(CastSimd, LargeCopiesWrittenPastTheCaches) {
  WEFT_REQUIRE_VECTOR_BUILDS();
  const int64_t rows = 4096, cols = 2064;
  ASSERT_GE(rows * cols / 2, cpu::kStreamBytes);
  const Tensor x = Tensor::from({rows, cols}, random_values(rows * cols, 11));
  for (const auto& [name, cfg] : configs(true, true)) {
    if (name.find("scale 300") == std::string::npos && name.find("mxfp8") == std::string::npos &&
        name.find("amax -1") == std::string::npos && name.find("offset 3") == std::string::npos) {
      continue;
    }
    expect_same(x, cfg, name + " large");
  }
}

TEST(CastSimd, Bf16Inputs) {
  WEFT_REQUIRE_VECTOR_BUILDS();
  const Tensor x = Tensor::from({66, 98}, random_values(66 * 98, 3)).to(DType::bf16);
  for (const auto& [name, cfg] : configs(true, true)) expect_same(x, cfg, name + " bf16");
}

// Every code of each format, under every scale code (NaN scales included),
// decoded by each build in both directions.
// The same for f32 outputs, where a NaN equals any NaN: a NaN code under a
// NaN scale (garbage f32 scale bytes, as below) gives one of the two
// payloads, which one depending on the operand order the compiler picks for
// the product (the ASan build's differs from Release's).
void expect_floats(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                   const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t first = got.size(), count = 0;
  for (size_t i = 0; i + 4 <= got.size(); i += 4) {
    float g, w;
    std::memcpy(&g, &got[i], 4);
    std::memcpy(&w, &want[i], 4);
    if (std::memcmp(&got[i], &want[i], 4) != 0 && !(std::isnan(g) && std::isnan(w))) {
      first = std::min(first, i / 4);
      ++count;
    }
  }
  EXPECT_EQ(count, 0u) << what << ": " << count << " floats differ, the first at " << first;
}

TEST(CastSimd, DequantizeEveryCodeUnderEveryScale) {
  WEFT_REQUIRE_VECTOR_BUILDS();
  const int64_t rows = 256, cols = 288;
  const Tensor x = Tensor::from({rows, cols}, random_values(rows * cols, 4));
  for (const auto& [name, cfg] : configs(true, true)) {
    if (cfg.stochastic) continue;
    QuantizedTensor q;
    {
      cpu::ScopedCastIsa forced(VectorIsa::baseline);
      quantize(ec, x, cfg, q);
    }
    // Data and scale bytes running through every value, out of step.
    for (Tensor* t : {&q.data, &q.col_data, &q.scale_inv, &q.col_scale_inv}) {
      if (cfg.mode == ScalingMode::tensor && (t == &q.scale_inv || t == &q.col_scale_inv)) continue;
      auto* p = static_cast<uint8_t*>(t->raw());
      for (int64_t i = 0; i < t->nbytes(); ++i) p[i] = static_cast<uint8_t>(i * 7 + i / 256);
    }
    Result want = dequantized(q, {});
    for (VectorIsa isa : vector_builds()) {
      SCOPED_TRACE(name + " on " + vector_isa_name(isa));
      cpu::ScopedCastIsa forced(isa);
      const Result got = dequantized(q, {});
      expect_floats(got.back, want.back, "dequantized");
      expect_floats(got.back_col, want.back_col, "dequantized column-wise copy");
    }
  }
}

TEST(CastSimd, UniformsAreThoseOfTheRandomStream) {
  WEFT_REQUIRE_VECTOR_BUILDS();
  for (VectorIsa isa : vector_builds()) {
    const cpu::cast_simd::Kernels* k = isa == VectorIsa::avx512 ? cpu::cast_simd::avx512_kernels()
                                                                : cpu::cast_simd::avx2_kernels();
    ASSERT_NE(k, nullptr);
    for (uint64_t stream : {0ull, 1ull, 2ull, 3ull, 1001ull, (1ull << 34) - 4 * 9 - 1}) {
      for (int64_t n : {1, 5, 63, 64, 65, 200}) {
        std::vector<float> u(static_cast<size_t>(n));
        k->uniforms(77, stream, n, u.data());
        int bad = 0;
        for (int64_t i = 0; i < n; ++i) {
          bad += std::bit_cast<uint32_t>(u[static_cast<size_t>(i)]) !=
                 std::bit_cast<uint32_t>(uniform_at(77, stream, static_cast<uint64_t>(i)));
        }
        EXPECT_EQ(bad, 0) << vector_isa_name(isa) << " stream " << stream << " n " << n;
      }
    }
  }
}

TEST(CastSimd, AmaxMatchesTheBaseline) {
  WEFT_REQUIRE_VECTOR_BUILDS();
  for (int64_t n : {1, 15, 16, 17, 70000}) {
    std::vector<float> v = random_values(n, static_cast<uint32_t>(n));
    std::replace_if(
        v.begin(), v.end(), [](float f) { return std::isnan(f); }, 1.0f);
    for (int nan = 0; nan < 2; ++nan) {
      if (nan) v[static_cast<size_t>(n / 2)] = std::numeric_limits<float>::quiet_NaN();
      const Tensor x = Tensor::from({n}, v);
      float want = 0;
      {
        cpu::ScopedCastIsa forced(VectorIsa::baseline);
        want = amax(ec, x);
      }
      for (VectorIsa isa : vector_builds()) {
        cpu::ScopedCastIsa forced(isa);
        EXPECT_EQ(std::bit_cast<uint32_t>(amax(ec, x)), std::bit_cast<uint32_t>(want))
            << vector_isa_name(isa) << " n " << n;
      }
    }
  }
}

// A per-tensor scale must be a finite positive number (the recipes derive
// one from an amax): a NaN scale would make products of two NaNs, whose sign
// depends on how the compiler orders the multiplication.
TEST(CastSimd, RejectsScalesThatAreNotFinitePositive) {
  QuantizedTensor q;
  for (float s : {0.0f, -1.0f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_THROW(quantize(ec, Tensor::zeros({2, 32}), {.dtype = DType::e4m3, .scale = s}, q), Error)
        << s;
  }
}

// The build the casts run by default is the widest the processor runs, or
// the one WEFT_MAX_CPU_ISA caps them at (ctest's kernels_cast_avx2 run).
TEST(CastSimd, DefaultBuildHonoursTheCap) {
  const char* cap = std::getenv("WEFT_MAX_CPU_ISA");
  VectorIsa want = VectorIsa::baseline;
  for (VectorIsa isa : {VectorIsa::avx2, VectorIsa::avx512}) {
    if (processor_runs(isa)) want = isa;
  }
  if (cap != nullptr && std::string(cap) == "avx2" && processor_runs(VectorIsa::avx2)) {
    want = VectorIsa::avx2;
  }
  if (cap != nullptr && std::string(cap) == "baseline") want = VectorIsa::baseline;
  EXPECT_EQ(vector_isa(), want);
  const cpu::cast_simd::Kernels* k = cpu::cast_kernels();
  EXPECT_EQ(k == nullptr ? "baseline" : std::string(k->isa), vector_isa_name(want));
}

}  // namespace
}  // namespace weft::kernels
