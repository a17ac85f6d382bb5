#include "weft/kernels/impl/gemm.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "weft/core/cuda.h"
#include "weft/core/cuda/device_guard.h"
#include "weft/core/error.h"
#include "weft/kernels/cuda/gemm.h"
#include "weft/kernels/cuda/gemm_plan.h"

namespace weft::kernels::impl {

namespace {

using namespace lt;

// A vector of n elements as one dense row.
StridedMatrices vector_of(const Tensor& t) {
  StridedMatrices s;
  s.data = t.raw();
  s.dtype = t.dtype();
  s.rows = 1;
  s.cols = t.numel();
  s.row_stride = t.numel();
  s.col_stride = 1;
  return s;
}

// c = alpha · a·b (+ c if accumulate) (+ bias on every row), for every entry
// of the batch dimensions: cuBLASLt runs one strided batch, the host loops
// over the other.
void matmul(const ExecContext& ec, const StridedMatrices& a, const StridedMatrices& b,
            const StridedMatrices& c, const Tensor* bias, float alpha, bool accumulate) {
  WEFT_CHECK(c.col_stride == 1, "gemm output needs dense rows, got column stride {}", c.col_stride);
  // cuBLASLt has no f32 product with a bf16 output: the product goes to a
  // dense f32 buffer and is rounded into c once.
  if (a.dtype == DType::f32 && c.dtype == DType::bf16) {
    StridedMatrices wide = c;
    wide.dtype = DType::f32;
    wide.row_stride = c.cols;
    wide.batch_stride[1] = c.rows * c.cols;
    wide.batch_stride[0] = c.batch[1] * wide.batch_stride[1];
    const Tensor buffer = ec.empty({c.batch[0] * wide.batch_stride[0]}, DType::f32);
    wide.data = buffer.raw();
    if (accumulate) cuda::convert_matrices(ec, c, wide, nullptr, DType::f32);
    matmul(ec, a, b, wide, bias, alpha, accumulate);
    cuda::convert_matrices(ec, wide, c, nullptr, DType::f32);
    return;
  }
  // One batch dimension goes to cuBLASLt: the inner one, or the outer one
  // when the inner is trivial.
  const bool inner = c.batch[1] > 1;
  const int outer_dim = inner ? 0 : 1, batch_dim = inner ? 1 : 0;
  const int64_t outer = c.batch[outer_dim];
  auto layout = [&](const StridedMatrices& s) {
    return layout_of(s, s.batch[batch_dim], s.batch_stride[batch_dim],
                     outer > 1 ? s.batch_stride[outer_dim] : 0);
  };
  Problem p;
  p.device = ec.device().index;
  p.a = layout(b);
  p.b = layout(a);
  p.c = layout(c);
  // cuBLASLt's bias epilogue takes a bias of the output's type: an f32 bias
  // (weft's masters) for a bf16 output is rounded to bf16 first (n elements,
  // on the stream, as frameworks keep bf16 biases), so that the bias is added
  // in the epilogue, before the output's one rounding, instead of in a pass
  // over the whole output after it.
  Tensor bias_rounded;
  if (bias && bias->dtype() == DType::f32 && c.dtype == DType::bf16) {
    bias_rounded = ec.empty({bias->numel()}, DType::bf16);
    cuda::convert_matrices(ec, vector_of(*bias), vector_of(bias_rounded), nullptr, DType::f32);
    bias = &bias_rounded;
  }
  const bool epilogue_types =
      bias && bias->dtype() == c.dtype && reinterpret_cast<uintptr_t>(bias->raw()) % 16 == 0;
  if (epilogue_types) {
    p.bias = 1 + cuda_type(bias->dtype());
    p.bias_alignment = alignment({reinterpret_cast<uintptr_t>(bias->raw())});
  }

  const weft::cuda::DeviceGuard on_device(p.device);
  Plan& plan = plan_for(p);
  if (plan.bias_epilogue) {
    const void* bias_ptr = bias->raw();
    check(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_ptr,
                                         sizeof(bias_ptr)),
          "cublasLtMatmulDescSetAttribute(BIAS_POINTER)", p);
  }
  if (!plan.tuned) tune(plan, ec, p, a.data, b.data, alpha);
  const Workspace workspace(ec, plan.workspace);
  const float beta = accumulate ? 1.0f : 0.0f;
  const auto es_a = static_cast<int64_t>(dtype_storage_bytes(a.dtype, 1));
  const auto es_c = static_cast<int64_t>(dtype_storage_bytes(c.dtype, 1));
  for (int64_t i = 0; i < outer; ++i) {
    const auto* pa = static_cast<const char*>(a.data) + i * a.batch_stride[outer_dim] * es_a;
    const auto* pb = static_cast<const char*>(b.data) + i * b.batch_stride[outer_dim] * es_a;
    auto* pc = static_cast<char*>(c.data) + i * c.batch_stride[outer_dim] * es_c;
    check(cublasLtMatmul(plan.handle, plan.desc, &alpha, pb, plan.a, pa, plan.b, &beta, pc, plan.c,
                         pc, plan.c, &plan.algo, workspace.ptr, plan.workspace,
                         static_cast<cudaStream_t>(ec.stream())),
          "cublasLtMatmul", p);
  }
  if (bias && !plan.bias_epilogue) cuda::convert_matrices(ec, c, c, bias->raw(), bias->dtype());
}

StridedMatrices matrix(const Tensor& t, bool transposed) {
  StridedMatrices s;
  const int64_t r = t.shape().rows(), c = t.shape().last();
  s.data = t.raw();
  s.dtype = t.dtype();
  s.rows = transposed ? c : r;
  s.cols = transposed ? r : c;
  s.row_stride = transposed ? 1 : c;
  s.col_stride = transposed ? c : 1;
  return s;
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// The alignment of a fresh allocation (the caching allocator hands out
// 512-byte multiples of cudaMalloc's 256-byte aligned memory): the rounded
// bias and the bias gradient's scratch vector.
constexpr int64_t kFreshAlignment = 256;

// A GemmEpilogue call as one cuBLASLt problem (kernels/gemm.cpp has checked
// the arguments; not f32 operands for a bf16 output): false where the layout
// rules of cuBLASLt's epilogues rule it out (it then runs unfused).
//
// cuBLASLt computes weft's row-major c (m, n) = op(a)·op(b) as the
// column-major D (n x m) = op(b)ᵀ·op(a)ᵀ: its A is weft's b, its B weft's a,
// and D's rows are c's columns. So cuBLASLt's bias vector, which runs along
// D's rows (length "M" in cuBLASLt's terms), is weft's bias over c's n
// columns, and the DGELU_BGRAD gradient is the column sums of c; the aux
// matrix is laid out as D (leading dimension n); and the gradient that sums
// weft's a over k (the wgrad GEMM's db) is BGRADB, cuBLASLt's B being a, its
// length D's column count m (BGRADA would sum weft's b).
bool epilogue_problem(const ExecContext& ec, const Tensor& a, const Tensor& b, const Tensor& c,
                      const GemmOptions& opt, Problem& p) {
  const StridedMatrices sa = matrix(a, opt.trans_a), sb = matrix(b, opt.trans_b),
                        sc = matrix(c, false);
  const int64_t n = sc.cols;
  p.device = ec.device().index;
  p.a = layout_of(sb, 1, 0, 0);
  p.b = layout_of(sa, 1, 0, 0);
  p.c = layout_of(sc, 1, 0, 0);
  const int64_t own_type = 1 + cuda_type(c.dtype());
  auto with_aux = [&] {
    // AUX_LD must be a multiple of 8 (cublasLt.h); the aux buffer is c's
    // twin, dense rows of n.
    if (n % 8 != 0 || !aligned16(opt.aux->raw())) return false;
    p.aux_ld = n;
    p.aux_alignment = alignment({reinterpret_cast<uintptr_t>(opt.aux->raw())});
    return true;
  };
  switch (opt.epilogue) {
    case GemmEpilogue::none: return false;
    case GemmEpilogue::gelu_aux:
      if (!with_aux()) return false;
      p.epilogue = opt.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
      if (opt.bias) {
        // The bias in the output's type (as the BIAS epilogue): an f32 bias
        // of a bf16 output is rounded into a fresh buffer per call.
        if (opt.bias->dtype() == c.dtype()) {
          if (!aligned16(opt.bias->raw())) return false;
          p.bias_alignment = alignment({reinterpret_cast<uintptr_t>(opt.bias->raw())});
        } else if (opt.bias->dtype() == DType::f32 && c.dtype() == DType::bf16) {
          p.bias_alignment = kFreshAlignment;
        } else {
          return false;  // a bf16 bias of an f32 output: added after the product
        }
        p.bias = own_type;
      }
      return true;
    case GemmEpilogue::dgelu_bgrad:
      if (!with_aux()) return false;
      p.epilogue = opt.bias_grad ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU;
      if (opt.bias_grad) {
        // The bias gradient has the output's type (cublasLt.h) and is
        // overwritten: it goes to scratch and is added to bias_grad.
        p.bias = own_type;
        p.bias_alignment = kFreshAlignment;
      }
      return true;
    case GemmEpilogue::bgrad_a:
      p.epilogue = CUBLASLT_EPILOGUE_BGRADB;
      p.bias = own_type;
      p.bias_alignment = kFreshAlignment;
      return true;
  }
  return false;
}

}  // namespace

template <>
bool gemm_epilogue_fused<Backend::cuda>(const ExecContext& ec, const Tensor& a, const Tensor& b,
                                        const Tensor& c, const GemmOptions& opt) {
  Problem p;
  if (!epilogue_problem(ec, a, b, c, opt, p)) return false;
  const weft::cuda::DeviceGuard on_device(p.device);
  return !plan_for(p).refused;
}

template <>
bool gemm_epilogue<Backend::cuda>(const ExecContext& ec, const Tensor& a, const Tensor& b,
                                  Tensor& c, const GemmOptions& opt) {
  Problem p;
  if (!epilogue_problem(ec, a, b, c, opt, p)) return false;
  const weft::cuda::DeviceGuard on_device(p.device);
  Plan& plan = plan_for(p);
  if (plan.refused) return false;
  auto set_pointer = [&](cublasLtMatmulDescAttributes_t attr, const void* ptr, const char* what) {
    check(cublasLtMatmulDescSetAttribute(plan.desc, attr, &ptr, sizeof(ptr)), what, p);
  };
  // The bias (GELU_AUX_BIAS) in c's type, or the bias gradient's scratch.
  Tensor bias_rounded, bias_grad;
  if (opt.bias) {
    const void* bias_ptr = opt.bias->raw();
    if (opt.bias->dtype() != c.dtype()) {
      bias_rounded = ec.empty({opt.bias->numel()}, c.dtype());
      cuda::convert_matrices(ec, vector_of(*opt.bias), vector_of(bias_rounded), nullptr,
                             DType::f32);
      bias_ptr = bias_rounded.raw();
    }
    set_pointer(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_ptr,
                "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  }
  if (opt.bias_grad) {
    bias_grad = ec.empty({opt.bias_grad->numel()}, c.dtype());
    set_pointer(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_grad.raw(),
                "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  }
  if (p.aux_ld != 0) {
    set_pointer(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, opt.aux->raw(),
                "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_POINTER)");
  }
  if (!plan.tuned) tune(plan, ec, p, a.raw(), b.raw(), opt.alpha);
  if (plan.refused) return false;
  const Workspace workspace(ec, plan.workspace);
  const float beta = opt.accumulate ? 1.0f : 0.0f;
  const cublasStatus_t status =
      cublasLtMatmul(plan.handle, plan.desc, &opt.alpha, b.raw(), plan.a, a.raw(), plan.b, &beta,
                     c.raw(), plan.c, c.raw(), plan.c, &plan.algo, workspace.ptr, plan.workspace,
                     static_cast<cudaStream_t>(ec.stream()));
  if (status != CUBLAS_STATUS_SUCCESS) {
    // Refused at run time (nothing was enqueued): remembered, and this call
    // runs unfused.
    plan.refused = true;
    return false;
  }
  if (opt.bias_grad) {
    // bias_grad (f32) += the scratch gradient (c's type), on the stream.
    const StridedMatrices g = vector_of(*opt.bias_grad);
    cuda::convert_matrices(ec, g, g, bias_grad.raw(), c.dtype());
  }
  return true;
}

template <>
void gemm<Backend::cuda>(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& c,
                         const GemmOptions& opt) {
  const StridedMatrices sa = matrix(a, opt.trans_a), sb = matrix(b, opt.trans_b),
                        sc = matrix(c, false);
  const int64_t m = sa.rows, k = sa.cols, n = sb.cols;
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!opt.accumulate) c.zero();
    return;
  }
  matmul(ec, sa, sb, sc, opt.bias, opt.alpha, opt.accumulate);
}

// FP8: cuBLASLt's A is weft's b (its op T: B's rows run along k), B is weft's
// a (op N); the scale-inverses are device pointers, set on the descriptor
// for each call (plans are per thread).
template <>
void quantized_gemm<Backend::cuda>(const ExecContext& ec, const QuantizedOperand& a,
                                   const QuantizedOperand& b, Tensor& c,
                                   const QuantizedGemmOptions& opt) {
  const Tensor& da = a.columnwise ? a.q->col_data : a.q->data;
  const Tensor& db = b.columnwise ? b.q->col_data : b.q->data;
  const Tensor& sa = a.columnwise ? a.q->col_scale_inv : a.q->scale_inv;
  const Tensor& sb = b.columnwise ? b.q->col_scale_inv : b.q->scale_inv;
  const int64_t m = a.rows(), n = b.rows(), k = a.cols();
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!opt.accumulate) c.zero();
    return;
  }
  const StridedMatrices ma = matrix(da, false), mb = matrix(db, true), mc = matrix(c, false);
  Problem p;
  p.device = ec.device().index;
  p.a = layout_of(mb, 1, 0, 0);
  p.b = layout_of(ma, 1, 0, 0);
  p.c = layout_of(mc, 1, 0, 0);
  p.fast_accumulation = opt.fast_accumulation ? 1 : 0;
  const weft::cuda::DeviceGuard on_device(p.device);
  Plan& plan = plan_for(p);
  const void* scale_a = sb.raw();  // cuBLASLt's A is weft's b
  const void* scale_b = sa.raw();
  check(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_a,
                                       sizeof(scale_a)),
        "cublasLtMatmulDescSetAttribute(A_SCALE_POINTER)", p);
  check(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_b,
                                       sizeof(scale_b)),
        "cublasLtMatmulDescSetAttribute(B_SCALE_POINTER)", p);
  if (!plan.tuned) tune(plan, ec, p, da.raw(), db.raw(), opt.alpha);
  const Workspace workspace(ec, plan.workspace);
  const float beta = opt.accumulate ? 1.0f : 0.0f;
  check(cublasLtMatmul(plan.handle, plan.desc, &opt.alpha, db.raw(), plan.a, da.raw(), plan.b,
                       &beta, c.raw(), plan.c, c.raw(), plan.c, &plan.algo, workspace.ptr,
                       plan.workspace, static_cast<cudaStream_t>(ec.stream())),
        "cublasLtMatmul", p);
}

template <>
void batched_gemm<Backend::cuda>(const ExecContext& ec, const StridedMatrices& a,
                                 const StridedMatrices& b, const StridedMatrices& c, float alpha,
                                 bool accumulate) {
  if (c.rows == 0 || c.cols == 0 || c.batch[0] == 0 || c.batch[1] == 0) return;
  WEFT_CHECK(a.cols > 0, "batched gemm with an empty inner dimension is not supported");
  matmul(ec, a, b, c, nullptr, alpha, accumulate);
}

template <>
int64_t plans_created<Backend::cuda>() {
  return plans_created_here();
}

}  // namespace weft::kernels::impl
