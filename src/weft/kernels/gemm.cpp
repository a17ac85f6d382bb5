#include "weft/kernels/gemm.h"

#include <mutex>
#include <set>
#include <string>

#include "weft/core/cuda.h"
#include "weft/kernels/activation.h"
#include "weft/kernels/cast.h"
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

// Under kernel profiling (bench step --profile) each GEMM shape is a row of
// the profile of its own, "gemm MxNxK TN bf16" (op(a), op(b), output type);
// otherwise every GEMM is "gemm". The names live as long as the process.
const char* span_name(int64_t m, int64_t n, int64_t k, const GemmOptions& opt, DType out) {
  if (!cuda::kernel_profiling()) return "gemm";
  static std::mutex mu;
  static auto* names = new std::set<std::string>;
  const std::lock_guard<std::mutex> lock(mu);
  return names
      ->insert(format("gemm {}x{}x{} {}{} {}{}{}", m, n, k, opt.trans_a ? "T" : "N",
                      opt.trans_b ? "T" : "N", dtype_name(out),
                      opt.epilogue == GemmEpilogue::none ? "" : " ",
                      opt.epilogue == GemmEpilogue::none ? "" : gemm_epilogue_name(opt.epilogue)))
      .first->c_str();
}

// The arguments of an epilogue (GemmOptions::epilogue), for a GEMM of
// op(a) (m, k) and op(b) (k, n).
void check_epilogue(const Tensor& a, const Tensor& c, const GemmOptions& opt, int64_t m,
                    int64_t n) {
  const char* name = gemm_epilogue_name(opt.epilogue);
  WEFT_CHECK(opt.alpha == 1.0f, "gemm epilogue {} takes alpha = 1, got {}", name, opt.alpha);
  WEFT_CHECK(!opt.accumulate || opt.epilogue == GemmEpilogue::bgrad_a,
             "gemm epilogue {} writes c, it cannot accumulate", name);
  WEFT_CHECK(opt.bias == nullptr || opt.epilogue == GemmEpilogue::gelu_aux,
             "gemm epilogue {} takes no bias", name);
  if (opt.epilogue == GemmEpilogue::gelu_aux || opt.epilogue == GemmEpilogue::dgelu_bgrad) {
    WEFT_CHECK(opt.aux != nullptr && opt.aux->defined(), "gemm epilogue {} needs aux", name);
    WEFT_CHECK(opt.aux->shape() == c.shape() && opt.aux->dtype() == c.dtype(),
               "gemm epilogue {}: aux is {} {}, c {} {}", name, opt.aux->shape(),
               dtype_name(opt.aux->dtype()), c.shape(), dtype_name(c.dtype()));
    WEFT_CHECK(opt.aux->raw() != c.raw(), "gemm epilogue {}: aux and c must not overlap", name);
  }
  if (opt.epilogue == GemmEpilogue::bgrad_a) {
    WEFT_CHECK(opt.trans_a, "gemm epilogue bgrad_a sums a's columns: it needs trans_a");
    WEFT_CHECK(opt.bias_grad != nullptr, "gemm epilogue bgrad_a needs bias_grad");
    WEFT_CHECK(a.raw() != c.raw(), "gemm epilogue bgrad_a: a and c must not overlap");
  }
  if (opt.bias_grad) {
    WEFT_CHECK(opt.epilogue != GemmEpilogue::gelu_aux, "gemm epilogue gelu_aux takes no bias_grad");
    const int64_t want = opt.epilogue == GemmEpilogue::bgrad_a ? m : n;
    WEFT_CHECK(opt.bias_grad->dtype() == DType::f32 && opt.bias_grad->numel() == want,
               "gemm epilogue {}: bias_grad must be f32 with {} elements, got {} {}", name, want,
               dtype_name(opt.bias_grad->dtype()), opt.bias_grad->shape());
  }
}

// The epilogue as the sequence gemm.h writes next to it.
void gemm_unfused(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& c,
                  const GemmOptions& opt) {
  const GemmOptions plain{.trans_a = opt.trans_a,
                          .trans_b = opt.trans_b,
                          .accumulate = opt.accumulate,
                          .alpha = opt.alpha,
                          .bias = opt.bias};
  switch (opt.epilogue) {
    case GemmEpilogue::none: gemm(ec, a, b, c, plain); return;
    case GemmEpilogue::gelu_aux:
      gemm(ec, a, b, *opt.aux, plain);
      gelu_forward(ec, *opt.aux, c);
      return;
    case GemmEpilogue::dgelu_bgrad:
      gemm(ec, a, b, c, plain);
      gelu_backward(ec, c, *opt.aux, c);
      if (opt.bias_grad) bias_backward(ec, c, *opt.bias_grad);
      return;
    case GemmEpilogue::bgrad_a:
      gemm(ec, a, b, c, plain);
      bias_backward(ec, a, *opt.bias_grad);
      return;
  }
}

// Whether the backend may fuse: not f32 operands for a bf16 output (their
// product goes through an f32 buffer), and a product with something to sum
// over.
bool may_fuse(const Tensor& a, const Tensor& c, int64_t m, int64_t n, int64_t k) {
  return !(a.dtype() == DType::f32 && c.dtype() == DType::bf16) && m > 0 && n > 0 && k > 0;
}

}  // namespace

const char* gemm_epilogue_name(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::none: return "none";
    case GemmEpilogue::gelu_aux: return "gelu_aux";
    case GemmEpilogue::dgelu_bgrad: return "dgelu_bgrad";
    case GemmEpilogue::bgrad_a: return "bgrad_a";
  }
  return "?";
}

bool gemm_epilogue_fused(const ExecContext& ec, const Tensor& a, const Tensor& b, const Tensor& c,
                         const GemmOptions& opt) {
  if (opt.epilogue == GemmEpilogue::none) return false;
  check_dtypes(a.dtype(), b.dtype(), c.dtype());
  const OpDims oa = op_dims(a, opt.trans_a), ob = op_dims(b, opt.trans_b);
  check_epilogue(a, c, opt, oa.rows, ob.cols);
  if (!may_fuse(a, c, oa.rows, ob.cols, oa.cols)) return false;
  return detail::dispatch(
      ec, "gemm_epilogue_fused", {&a, &b, &c, opt.bias, opt.aux, opt.bias_grad},
      [&]<Backend B>() { return impl::gemm_epilogue_fused<B>(ec, a, b, c, opt); });
}

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
    WEFT_CHECK(opt.bias->dtype() == DType::f32 || opt.bias->dtype() == DType::bf16,
               "gemm bias must be f32 or bf16, got {}", dtype_name(opt.bias->dtype()));
    WEFT_CHECK(opt.bias->numel() == n, "gemm bias has {} elements, expected {}", opt.bias->numel(),
               n);
    WEFT_CHECK(m == 0 || n == 0 || k > 0, "gemm with k = 0 and a bias is not supported");
  }
  if (opt.epilogue != GemmEpilogue::none) {
    check_epilogue(a, c, opt, m, n);
    const bool fused =
        may_fuse(a, c, m, n, k) &&
        detail::dispatch(ec, span_name(m, n, k, opt, c.dtype()),
                         {&a, &b, &c, opt.bias, opt.aux, opt.bias_grad},
                         [&]<Backend B>() { return impl::gemm_epilogue<B>(ec, a, b, c, opt); });
    if (!fused) gemm_unfused(ec, a, b, c, opt);
    return;
  }
  if (a.dtype() == DType::f32 && c.dtype() == DType::bf16) {
    // f32 operands, a bf16 output (a quantized recipe's emulation under bf16
    // activations): the f32 product (plus c and the bias) rounded once, as
    // quantized_gemm's emulation does, on either backend.
    Tensor wide = ec.empty(c.shape(), DType::f32, MemoryTag::activations);
    if (opt.accumulate) convert(ec, c, wide);
    gemm(ec, a, b, wide, opt);
    convert(ec, wide, c);
    return;
  }
  return detail::dispatch(ec, span_name(m, n, k, opt, c.dtype()), {&a, &b, &c, opt.bias},
                          [&]<Backend B>() { return impl::gemm<B>(ec, a, b, c, opt); });
}

int64_t PackedWeight::k() const { return trans_b_ ? plain_.shape().last() : plain_.shape().rows(); }
int64_t PackedWeight::n() const { return trans_b_ ? plain_.shape().rows() : plain_.shape().last(); }

void pack_b(const ExecContext& ec, const Tensor& b, bool trans_b, PackedWeight& out) {
  WEFT_CHECK(b.defined() && b.dim() == 2, "pack_b packs a matrix, got {}", b.shape());
  out.plain_ = b;
  out.trans_b_ = trans_b;
  const bool cpu = ec.device().is_cpu() && b.device().is_cpu();
  if (!cpu || b.dtype() != DType::bf16 || !impl::pack_b_cpu(ec, b, trans_b, out.packed_)) {
    out.packed_ = Tensor();
  }
}

void gemm(const ExecContext& ec, const Tensor& a, const PackedWeight& b, Tensor& c,
          const GemmOptions& opt) {
  WEFT_CHECK(b.defined(), "gemm with a packed weight that was never packed (pack_b)");
  WEFT_CHECK(opt.trans_b == b.trans_b(),
             "gemm: the weight was packed for op(b) = {}, but the call asks for {}",
             b.trans_b() ? "bᵀ" : "b", opt.trans_b ? "bᵀ" : "b");
  if (!b.packed()) return gemm(ec, a, b.plain(), c, opt);
  WEFT_CHECK(opt.bias == nullptr, "gemm with a packed weight takes no bias");
  WEFT_CHECK(opt.epilogue == GemmEpilogue::none, "gemm with a packed weight takes no epilogue");
  check_dtypes(a.dtype(), b.plain().dtype(), c.dtype());
  const OpDims oa = op_dims(a, opt.trans_a), oc = op_dims(c, false);
  WEFT_CHECK(oa.cols == b.k(), "gemm inner dimensions differ: op(a) is {}x{}, op(b) is {}x{}",
             oa.rows, oa.cols, b.k(), b.n());
  WEFT_CHECK(oc.rows == oa.rows && oc.cols == b.n(),
             "gemm output is {}x{} but op(a)·op(b) is {}x{} (a {}, b {}, c {})", oc.rows, oc.cols,
             oa.rows, b.n(), a.shape(), b.plain().shape(), c.shape());
  detail::kernel_device(ec, "gemm", {&a, &b.plain(), &c});
  impl::gemm_packed_cpu(ec, a, b.plain(), b.trans_b(), b.packed_, c, opt);
}

void quantized_gemm(const ExecContext& ec, const QuantizedOperand& a, const QuantizedOperand& b,
                    Tensor& c, const QuantizedGemmOptions& opt) {
  for (const QuantizedOperand* o : {&a, &b}) {
    WEFT_CHECK(o->q != nullptr, "quantized_gemm: an operand has no quantized tensor");
    WEFT_CHECK(o->q->mode == ScalingMode::tensor &&
                   (o->q->dtype == DType::e4m3 || o->q->dtype == DType::e5m2),
               "quantized_gemm multiplies per-tensor FP8 (e4m3, e5m2), got {} {}",
               scaling_mode_name(o->q->mode), dtype_name(o->q->dtype));
    WEFT_CHECK(o->columnwise ? o->q->has_columnwise() : o->q->has_rowwise(),
               "quantized_gemm: the operand's {} copy was not made (QuantizeConfig::{})",
               o->columnwise ? "column-wise" : "row-wise",
               o->columnwise ? "columnwise" : "rowwise");
  }
  WEFT_CHECK(a.q->dtype == DType::e4m3 || b.q->dtype == DType::e4m3,
             "quantized_gemm: FP8 products need at least one e4m3 operand, got two e5m2");
  WEFT_CHECK(c.dtype() == DType::f32 || c.dtype() == DType::bf16,
             "quantized_gemm writes f32 or bf16, got {}", dtype_name(c.dtype()));
  WEFT_CHECK(a.cols() == b.cols(),
             "quantized_gemm computes A·Bᵀ: A is {}x{} and B {}x{}, whose columns (k) differ; "
             "pass the copy whose rows run along k",
             a.rows(), a.cols(), b.rows(), b.cols());
  const OpDims oc = op_dims(c, false);
  WEFT_CHECK(oc.rows == a.rows() && oc.cols == b.rows(),
             "quantized_gemm output is {}x{} but A·Bᵀ is {}x{}", oc.rows, oc.cols, a.rows(),
             b.rows());
  const Tensor& da = a.columnwise ? a.q->col_data : a.q->data;
  const Tensor& db = b.columnwise ? b.q->col_data : b.q->data;
  if (!ec.device().is_cpu() && !quantized_gemm_is_native(ec, a, b, c)) {
    // The emulation on the device: both copies dequantized (in x's layout),
    // an f32 GEMM, as the CPU's quantized_gemm computes.
    Tensor fa = ec.empty({a.q->rows, a.q->cols}, DType::f32);
    Tensor fb = ec.empty({b.q->rows, b.q->cols}, DType::f32);
    dequantize(ec, *a.q, a.columnwise, fa);
    dequantize(ec, *b.q, b.columnwise, fb);
    gemm(ec, fa, fb, c,
         {.trans_a = a.columnwise,
          .trans_b = !b.columnwise,
          .accumulate = opt.accumulate,
          .alpha = opt.alpha});
    return;
  }
  return detail::dispatch(ec, "quantized_gemm", {&da, &db, &c},
                          [&]<Backend B>() { return impl::quantized_gemm<B>(ec, a, b, c, opt); });
}

bool fp8_gemm_layout_fits(const QuantizedOperand& a, const QuantizedOperand& b, const Tensor& c) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const Tensor& da = a.columnwise ? a.q->col_data : a.q->data;
  const Tensor& db = b.columnwise ? b.q->col_data : b.q->data;
  const int64_t k = a.cols(), n = b.rows();
  const int64_t row_bytes = dtype_storage_bytes(c.dtype(), n);
  return k % 16 == 0 && row_bytes % 16 == 0 && aligned(da.raw()) && aligned(db.raw()) &&
         aligned(c.raw());
}

bool quantized_gemm_is_native(const ExecContext& ec, const QuantizedOperand& a,
                              const QuantizedOperand& b, const Tensor& c) {
  const Device d = ec.device();
  return d.is_cuda() && cuda::compute_capability(d.index) >= 89 &&
         a.q->mode == ScalingMode::tensor && b.q->mode == ScalingMode::tensor &&
         fp8_gemm_layout_fits(a, b, c);
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
