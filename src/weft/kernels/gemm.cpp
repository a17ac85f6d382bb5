#include "weft/kernels/gemm.h"

#include "weft/kernels/dispatch.h"
#include "weft/kernels/impl/gemm.h"

namespace weft::kernels {

namespace {

void check_dtypes(DType a, DType b, DType c) {
  WEFT_CHECK(a == b, "gemm operands must have the same dtype, got {} and {}", dtype_name(a),
             dtype_name(b));
  WEFT_CHECK(a == DType::f32 || a == DType::bf16, "gemm supports f32 and bf16 inputs, got {}",
             dtype_name(a));
  WEFT_CHECK(c == DType::f32 || c == DType::bf16, "gemm writes f32 or bf16, got {}", dtype_name(c));
}

// (rows, cols) of op(t), t viewed as (rows, last dimension).
struct OpDims {
  int64_t rows, cols;
};
OpDims op_dims(const Tensor& t, bool transposed) {
  const int64_t r = t.shape().rows(), c = t.shape().last();
  return transposed ? OpDims{c, r} : OpDims{r, c};
}

}  // namespace

void gemm(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& c,
          const GemmOptions& opt) {
  check_dtypes(a.dtype(), b.dtype(), c.dtype());
  const OpDims oa = op_dims(a, opt.trans_a), ob = op_dims(b, opt.trans_b), oc = op_dims(c, false);
  const int64_t m = oa.rows, k = oa.cols, n = ob.cols;
  WEFT_CHECK(ob.rows == k, "gemm inner dimensions differ: op(a) is {}x{}, op(b) is {}x{}", m, k,
             ob.rows, n);
  WEFT_CHECK(oc.rows == m && oc.cols == n,
             "gemm output is {}x{} but op(a)·op(b) is {}x{} (a {}, b {}, c {})", oc.rows, oc.cols,
             m, n, a.shape(), b.shape(), c.shape());
  if (opt.bias) {
    WEFT_CHECK(opt.bias->numel() == n, "gemm bias has {} elements, expected {}", opt.bias->numel(),
               n);
    WEFT_CHECK(m == 0 || n == 0 || k > 0, "gemm with k = 0 and a bias is not supported");
  }
  return detail::dispatch(ec, "gemm", {&a, &b, &c, opt.bias},
                          [&]<Backend B>() { return impl::gemm<B>(ec, a, b, c, opt); });
}

void batched_gemm(const ExecContext& ec, const StridedMatrices& a, const StridedMatrices& b,
                  const StridedMatrices& c, float alpha, bool accumulate) {
  check_dtypes(a.dtype, b.dtype, c.dtype);
  WEFT_CHECK(a.cols == b.rows && c.rows == a.rows && c.cols == b.cols,
             "batched gemm shapes disagree: a {}x{}, b {}x{}, c {}x{}", a.rows, a.cols, b.rows,
             b.cols, c.rows, c.cols);
  for (int d = 0; d < 2; ++d) {
    WEFT_CHECK(a.batch[d] == c.batch[d] && b.batch[d] == c.batch[d],
               "batched gemm batch dimension {} disagrees: a {}, b {}, c {}", d, a.batch[d],
               b.batch[d], c.batch[d]);
  }
  return detail::dispatch(ec, "batched_gemm", {}, [&]<Backend B>() {
    return impl::batched_gemm<B>(ec, a, b, c, alpha, accumulate);
  });
}

int64_t gemm_primitives_created() { return impl::plans_created<Backend::cpu>(); }

}  // namespace weft::kernels
