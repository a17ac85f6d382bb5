// quantized_gemm: the FP8 product A·Bᵀ of two per-tensor quantized tensors.
// On the CPU, the exact emulation against a product computed here from the
// dequantized copies; on a GPU (cuBLASLt FP8, Hopper), against the CPU on the
// same codes (CPU and GPU quantize to the same bits), in the three layouts of
// a Linear (forward; dgrad with the weight's column-wise copy; wgrad with
// both column-wise copies), e4m3·e4m3 and e5m2·e4m3, accumulating into f32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_testing.h"
#include "testing.h"
#include "weft/kernels/cast.h"
#include "weft/kernels/gemm.h"

namespace weft::kernels {
namespace {

using weft::testing::error_of;
using weft::testing::random_tensor;

QuantizedTensor quantized(const ExecContext& ec, const Tensor& x, DType fp8, float scale) {
  QuantizeConfig cfg;
  cfg.dtype = fp8;
  cfg.scale = scale;
  cfg.rowwise = true;
  cfg.columnwise = true;
  QuantizedTensor q;
  quantize(ec, x.to(ec.device()), cfg, q);
  return q;
}

// The chosen copy of q as an f32 matrix (rows along the copy's rows), from
// the dequantized values, on the host.
std::vector<double> matrix_of(const QuantizedTensor& q, bool columnwise, int64_t& rows,
                              int64_t& cols) {
  Tensor x = ExecContext::host().empty({q.rows, q.cols}, DType::f32);
  QuantizedTensor h = q;  // dequantize on the host from host copies
  for (Tensor* t : {&h.data, &h.scale_inv, &h.col_data, &h.col_scale_inv}) {
    if (t->defined()) *t = t->to(Device::cpu());
  }
  dequantize(ExecContext::host(), h, columnwise, x);
  const std::vector<float> v = x.to_vector();
  rows = columnwise ? q.cols : q.rows;
  cols = columnwise ? q.rows : q.cols;
  std::vector<double> m(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < q.rows; ++r) {
    for (int64_t c = 0; c < q.cols; ++c) {
      const double e = v[static_cast<size_t>(r * q.cols + c)];
      if (columnwise) {
        m[static_cast<size_t>(c * q.rows + r)] = e;
      } else {
        m[static_cast<size_t>(r * q.cols + c)] = e;
      }
    }
  }
  return m;
}

// A·Bᵀ in f64 from the dequantized copies.
std::vector<double> reference(const QuantizedOperand& a, const QuantizedOperand& b) {
  int64_t m = 0, k = 0, n = 0, kb = 0;
  const std::vector<double> A = matrix_of(*a.q, a.columnwise, m, k);
  const std::vector<double> B = matrix_of(*b.q, b.columnwise, n, kb);
  std::vector<double> c(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        s += A[static_cast<size_t>(i * k + p)] * B[static_cast<size_t>(j * k + p)];
      }
      c[static_cast<size_t>(i * n + j)] = s;
    }
  }
  return c;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

struct Layout {
  const char* name;
  bool a_columnwise, b_columnwise;
};
// A Linear's three products, as weft would call them: forward x·Wᵀ (x, W
// row-wise), dgrad dy·W = dy·(Wᵀ)ᵀ (W's column-wise copy), wgrad dyᵀ·x (both
// column-wise).
const Layout kLayouts[] = {
    {"forward", false, false}, {"dgrad", false, true}, {"wgrad", true, true}};

// One product on `ec`: operands quantized from fixed random tensors shaped so
// that each layout multiplies (m, k)·(k, n) with m = 48, k = 64, n = 32.
void expect_matches(const ExecContext& ec, const Layout& l, DType a_type, DType out,
                    bool accumulate, bool fast, double tol) {
  SCOPED_TRACE(::testing::Message() << l.name << " " << dtype_name(a_type) << "·e4m3 -> "
                                    << dtype_name(out) << (accumulate ? " accumulate" : "")
                                    << (fast ? " fast" : "") << " on " << ec.device());
  const int64_t m = 48, k = 64, n = 32;
  // The tensors whose copies are A (m, k) and B (n, k).
  const Tensor xa = l.a_columnwise ? random_tensor({k, m}, 1, -3.0f, 3.0f)
                                   : random_tensor({m, k}, 1, -3.0f, 3.0f);
  const Tensor xb = l.b_columnwise ? random_tensor({k, n}, 2, -2.0f, 2.0f)
                                   : random_tensor({n, k}, 2, -2.0f, 2.0f);
  const QuantizedTensor qa = quantized(ec, xa, a_type, a_type == DType::e5m2 ? 1000.0f : 50.0f);
  const QuantizedTensor qb = quantized(ec, xb, DType::e4m3, 100.0f);
  const QuantizedOperand a{&qa, l.a_columnwise}, b{&qb, l.b_columnwise};
  const Tensor start = random_tensor({m, n}, 3, -1.0f, 1.0f, out);
  Tensor c = ec.empty(start.shape(), out);  // a copy: start stays as it was
  c.copy_from(start.to(ec.device()));
  QuantizedGemmOptions opt;
  opt.accumulate = accumulate;
  opt.alpha = 0.5f;
  opt.fast_accumulation = fast;
  quantized_gemm(ec, a, b, c, opt);
  std::vector<double> want = reference(a, b);
  const std::vector<float> s = start.to(DType::f32).to_vector();
  for (size_t i = 0; i < want.size(); ++i) want[i] = 0.5 * want[i] + (accumulate ? s[i] : 0.0);
  const std::vector<float> got = c.to(Device::cpu()).to(DType::f32).to_vector();
  ASSERT_EQ(got.size(), want.size());
  const double scale = max_abs(want);
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]) / scale);
  }
  EXPECT_LE(worst, tol) << "max error against the largest element";
}

TEST(QuantizedGemm, CpuIsTheExactEmulation) {
  const ExecContext ec = ExecContext::host();
  for (const Layout& l : kLayouts) {
    for (DType a : {DType::e4m3, DType::e5m2}) {
      // f32 sums of exact f32 products: rounding of the sums only.
      expect_matches(ec, l, a, DType::f32, false, false, 1e-6);
      expect_matches(ec, l, a, DType::f32, true, false, 1e-6);
      expect_matches(ec, l, a, DType::bf16, false, false, 1.0 / 128);
    }
  }
}

TEST(QuantizedGemm, RefusesWhatItCannotMultiply) {
  const ExecContext ec = ExecContext::host();
  const Tensor x = random_tensor({8, 16}, 4);
  const QuantizedTensor e4 = quantized(ec, x, DType::e4m3, 10.0f);
  const QuantizedTensor e5 = quantized(ec, x, DType::e5m2, 10.0f);
  Tensor c = ec.empty({8, 8}, DType::f32);
  EXPECT_NE(error_of([&] {
              quantized_gemm(ec, {&e5, false}, {&e5, false}, c);
            }).find("two e5m2"),
            std::string::npos);
  // A (8, 16) · Bᵀ with B the column-wise copy (16, 8): k differs.
  EXPECT_NE(error_of([&] {
              quantized_gemm(ec, {&e4, false}, {&e4, true}, c);
            }).find("pass the copy whose rows run along k"),
            std::string::npos);
  QuantizedTensor rows_only = e4;
  rows_only.col_data = Tensor();
  EXPECT_NE(error_of([&] {
              quantized_gemm(ec, {&e4, false}, {&rows_only, true}, c);
            }).find("column-wise copy was not made"),
            std::string::npos);
  Tensor wrong = ec.empty({8, 9}, DType::f32);
  EXPECT_NE(error_of([&] {
              quantized_gemm(ec, {&e4, false}, {&e4, false}, wrong);
            }).find("output is 8x9"),
            std::string::npos);
}

// The GPU: cuBLASLt FP8 on the GPU's own quantized copies (the CPU's codes),
// never dequantized. f32 out: Hopper's FP8 MMA accumulates with fewer bits
// than f32 even without fast accumulation (an H200 measured 1.0e-4 to 1.6e-4
// of the largest element at k = 64), hence 1e-3; a wrong layout or scale
// would be off by O(1). bf16 out: one rounding; fast accumulation (TE's
// forward setting) within 1e-2.
TEST(CudaQuantizedGemm, MatchesTheEmulation) {
  WEFT_REQUIRE_GPU();
  const ExecContext ec = ExecContext::cuda(0);
  for (const Layout& l : kLayouts) {
    for (DType a : {DType::e4m3, DType::e5m2}) {
      expect_matches(ec, l, a, DType::f32, false, false, 1e-3);
      expect_matches(ec, l, a, DType::f32, true, false, 1e-3);
      expect_matches(ec, l, a, DType::bf16, false, false, 1.0 / 128);
    }
    expect_matches(ec, l, DType::e4m3, DType::bf16, false, true, 1e-2);
  }
}

// What cuBLASLt's FP8 kernels take (16-byte rows of the operands along k and
// of c, 16-byte-aligned buffers): quantized_gemm multiplies FP8 natively only
// then, and runs the emulation on the device otherwise.
TEST(QuantizedGemm, NativeLayoutRule) {
  const ExecContext ec = ExecContext::host();
  const auto q = [&](int64_t rows, int64_t cols) {
    return quantized(ec, random_tensor({rows, cols}, 5), DType::e4m3, 10.0f);
  };
  const QuantizedTensor a = q(24, 32), b = q(40, 32), a88 = q(24, 88), b88 = q(40, 88);
  EXPECT_TRUE(fp8_gemm_layout_fits({&a, false}, {&b, false}, Tensor::empty({24, 40})));
  EXPECT_FALSE(fp8_gemm_layout_fits({&a88, false}, {&b88, false}, Tensor::empty({24, 40})));
  // c's rows: 40 f32 = 160 bytes fit, 38 f32 = 152 do not; 40 bf16 = 80 bytes fit.
  const QuantizedTensor b38 = q(38, 32);
  EXPECT_FALSE(fp8_gemm_layout_fits({&a, false}, {&b38, false}, Tensor::empty({24, 38})));
  EXPECT_TRUE(fp8_gemm_layout_fits({&a, false}, {&b, false}, Tensor::empty({24, 40}, DType::bf16)));
  // A view of c one element in: 4 bytes off 16.
  const Tensor wide = Tensor::empty({24 * 40 + 1});
  EXPECT_FALSE(
      fp8_gemm_layout_fits({&a, false}, {&b, false}, wide.narrow(1, 24 * 40).reshape({24, 40})));
  // The wgrad's k is the column-wise copies' row length: the token count.
  const QuantizedTensor ta = q(100, 64), tb = q(100, 32);
  EXPECT_FALSE(fp8_gemm_layout_fits({&ta, true}, {&tb, true}, Tensor::empty({64, 32})));
  // The CPU always runs the emulation.
  EXPECT_FALSE(quantized_gemm_is_native(ec, {&a, false}, {&b, false}, Tensor::empty({24, 40})));
}

}  // namespace
}  // namespace weft::kernels
