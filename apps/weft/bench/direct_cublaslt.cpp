#include "direct_cublaslt.h"

#if WEFT_HAVE_CUDA

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "weft/core/error.h"

namespace weft {

namespace {

void check(cublasStatus_t status, const char* call) {
  WEFT_CHECK(status == CUBLAS_STATUS_SUCCESS, "{} failed: {}", call,
             cublasLtGetStatusString(status));
}

void check(cudaError_t status, const char* call) {
  WEFT_CHECK(status == cudaSuccess, "{} failed: {}", call, cudaGetErrorString(status));
}

// One matmul descriptor attribute, its failure named by `what`.
template <typename T>
void set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const T& value,
                   const char* what) {
  const cublasStatus_t status = cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value));
  WEFT_CHECK(status == CUBLAS_STATUS_SUCCESS, "cublasLtMatmulDescSetAttribute({}) failed: {}", what,
             cublasLtGetStatusString(status));
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::bf16: return CUDA_R_16BF;
    case DType::e4m3: return CUDA_R_8F_E4M3;
    case DType::e5m2: return CUDA_R_8F_E5M2;
    default: return CUDA_R_32F;
  }
}

constexpr size_t kWorkspace = 32u << 20;

}  // namespace

struct DirectCublasLt::Impl {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a_layout = nullptr, b_layout = nullptr, c_layout = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulAlgo_t algo{};
  void* workspace = nullptr;
  const void *a = nullptr, *b = nullptr;
  void* c = nullptr;
  float alpha = 1.0f, beta = 0.0f;
  cudaStream_t stream = nullptr;

  ~Impl() {
    if (workspace) cudaFree(workspace);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c_layout) cublasLtMatrixLayoutDestroy(c_layout);
    if (b_layout) cublasLtMatrixLayoutDestroy(b_layout);
    if (a_layout) cublasLtMatrixLayoutDestroy(a_layout);
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (handle) cublasLtDestroy(handle);
  }
};

// Column-major cuBLASLt computes cᵀ (n x m) = op(b)ᵀ · op(a)ᵀ: its A is weft's
// b, its B weft's a, each read transposed exactly when weft's is not.
DirectCublasLt::DirectCublasLt(const GemmShape& s, DType in, DType out, const void* a,
                               const void* b, void* c, bool accumulate, void* stream, int device,
                               const DirectFp8* fp8, const DirectEpilogue* epilogue)
    : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  check(cudaSetDevice(device), "cudaSetDevice");
  d.a = a;
  d.b = b;
  d.c = c;
  d.beta = accumulate ? 1.0f : 0.0f;
  d.stream = static_cast<cudaStream_t>(stream);
  check(cublasLtCreate(&d.handle), "cublasLtCreate");
  check(cublasLtMatmulDescCreate(&d.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
        "cublasLtMatmulDescCreate");
  const int32_t op_a = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int32_t op_b = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_attribute(d.desc, CUBLASLT_MATMUL_DESC_TRANSA, op_a, "TRANSA");
  set_attribute(d.desc, CUBLASLT_MATMUL_DESC_TRANSB, op_b, "TRANSB");
  const auto m = static_cast<uint64_t>(s.m), n = static_cast<uint64_t>(s.n),
             k = static_cast<uint64_t>(s.k);
  // cuBLASLt's A is weft's b, its B weft's a.
  const cudaDataType_t type_a = cuda_type(fp8 ? fp8->b_type : in);
  const cudaDataType_t type_b = cuda_type(fp8 ? fp8->a_type : in);
  if (fp8) {
    const void* scale_a = fp8->b_scale_inv;
    const void* scale_b = fp8->a_scale_inv;
    set_attribute(d.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, scale_a, "A_SCALE_POINTER");
    set_attribute(d.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, scale_b, "B_SCALE_POINTER");
    if (fp8->fast_accumulation) {
      const int8_t fast = 1;
      set_attribute(d.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, fast, "FAST_ACCUM");
    }
  }
  if (epilogue && epilogue->kind != kernels::GemmEpilogue::none) {
    using kernels::GemmEpilogue;
    const bool bias = epilogue->bias || epilogue->bias_grad;
    uint32_t e = CUBLASLT_EPILOGUE_BGRADB;
    if (epilogue->kind == GemmEpilogue::gelu_aux) {
      e = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    } else if (epilogue->kind == GemmEpilogue::dgelu_bgrad) {
      e = bias ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU;
    }
    set_attribute(d.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, e, "EPILOGUE");
    if (bias) {
      const void* ptr = epilogue->bias ? epilogue->bias : epilogue->bias_grad;
      const auto type = static_cast<int32_t>(cuda_type(out));
      set_attribute(d.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, ptr, "BIAS_POINTER");
      set_attribute(d.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, type, "BIAS_DATA_TYPE");
    }
    if (epilogue->aux) {
      const int64_t ld = s.n;
      const void* ptr = epilogue->aux;
      set_attribute(d.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, ptr, "EPILOGUE_AUX_POINTER");
      set_attribute(d.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ld, "EPILOGUE_AUX_LD");
    }
  }
  check(s.trans_b ? cublasLtMatrixLayoutCreate(&d.a_layout, type_a, k, n, s.k)
                  : cublasLtMatrixLayoutCreate(&d.a_layout, type_a, n, k, s.n),
        "cublasLtMatrixLayoutCreate(A)");
  check(s.trans_a ? cublasLtMatrixLayoutCreate(&d.b_layout, type_b, m, k, s.m)
                  : cublasLtMatrixLayoutCreate(&d.b_layout, type_b, k, m, s.k),
        "cublasLtMatrixLayoutCreate(B)");
  check(cublasLtMatrixLayoutCreate(&d.c_layout, cuda_type(out), n, m, s.n),
        "cublasLtMatrixLayoutCreate(C)");
  check(cublasLtMatmulPreferenceCreate(&d.pref), "cublasLtMatmulPreferenceCreate");
  const uint64_t workspace = kWorkspace;
  check(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &workspace, sizeof(workspace)),
        "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  check(cublasLtMatmulAlgoGetHeuristic(d.handle, d.desc, d.a_layout, d.b_layout, d.c_layout,
                                       d.c_layout, d.pref, 1, &result, &found),
        "cublasLtMatmulAlgoGetHeuristic");
  WEFT_CHECK(found > 0, "cuBLASLt has no algorithm for {}x{}x{}", s.m, s.n, s.k);
  d.algo = result.algo;
  check(cudaMalloc(&d.workspace, kWorkspace), "cudaMalloc");
}

DirectCublasLt::~DirectCublasLt() = default;

void DirectCublasLt::run() {
  Impl& d = *impl_;
  check(cublasLtMatmul(d.handle, d.desc, &d.alpha, d.b, d.a_layout, d.a, d.b_layout, &d.beta, d.c,
                       d.c_layout, d.c, d.c_layout, &d.algo, d.workspace, kWorkspace, d.stream),
        "cublasLtMatmul");
}

double cuda_seconds_per_call(void* stream, const std::function<void()>& fn, int iters) {
  const auto s = static_cast<cudaStream_t>(stream);
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaEventRecord(start, s), "cudaEventRecord");
  for (int i = 0; i < iters; ++i) fn();
  check(cudaEventRecord(stop, s), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  const cudaError_t elapsed = cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  check(elapsed, "cudaEventElapsedTime");
  return static_cast<double>(ms) * 1e-3 / iters;
}

}  // namespace weft

#endif  // WEFT_HAVE_CUDA
