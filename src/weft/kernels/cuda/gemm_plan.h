// The cuBLASLt plans behind the CUDA GEMMs (kernels/cuda/gemm.cpp): a
// problem's descriptors and algorithm, built once per shape and thread,
// tuned on the first call, and the call's workspace. Internal to kernels/cuda/.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "weft/core/cuda.h"
#include "weft/core/error.h"
#include "weft/core/exec_context.h"
#include "weft/kernels/gemm.h"

namespace weft::kernels::impl::lt {

// One operand in cuBLASLt's column-major terms.
struct Layout {
  int64_t rows = 0, cols = 0, ld = 0;
  int64_t batch = 1, stride = 0;  // the batch cuBLASLt runs (strided)
  bool transposed = false;        // op(X) = Xᵀ
  cudaDataType_t type = CUDA_R_32F;
  int64_t alignment = 256;  // bytes, of every matrix's first element
};

// Everything that selects a plan.
struct Problem {
  int device = 0;
  Layout a, b, c;  // cuBLASLt's A (weft's b), B (weft's a), C = D
  // 0: no bias vector; else 1 + the cudaDataType_t of the bias (BIAS,
  // GELU_AUX_BIAS) or of the bias gradient (DGELU_BGRAD, BGRADB).
  int64_t bias = 0;
  int64_t fast_accumulation = 0;  // FP8: Hopper's fast accumulation
  // 0: the bias's epilogue (BIAS, or none); else the cublasLtEpilogue_t of a
  // GemmEpilogue (GELU_AUX(_BIAS), DGELU(_BGRAD), BGRADB).
  int64_t epilogue = 0;
  int64_t aux_ld = 0;  // GELU_AUX / DGELU: the pre-activation's leading dimension
  // Alignments (bytes) of the bias vector and the aux matrix, which the
  // heuristic reads from their pointers.
  int64_t bias_alignment = 0, aux_alignment = 0;
  std::string describe() const {  // for error messages, in weft's terms
    const int64_t m = c.cols, n = c.rows, k = a.transposed ? a.rows : a.cols;
    return fmt::format("{}x{} · {}x{} GEMM ({} in, {} out, batch {}, {}{}, epilogue {}, cuda:{})",
                       m, k, k, n, type_name(b.type), type_name(c.type), c.batch,
                       b.transposed ? "aᵀ" : "a", a.transposed ? "·bᵀ" : "·b",
                       epilogue != 0 ? epilogue
                       : bias != 0   ? static_cast<int64_t>(CUBLASLT_EPILOGUE_BIAS)
                                     : int64_t{0},
                       device);
  }
  static const char* type_name(cudaDataType_t t) {
    switch (t) {
      case CUDA_R_16BF: return "bf16";
      case CUDA_R_8F_E4M3: return "fp8_e4m3";
      case CUDA_R_8F_E5M2: return "fp8_e5m2";
      default: return "f32";
    }
  }
};

void check(cublasStatus_t status, const char* call, const Problem& p);

// Descriptors and the algorithm of one problem. Per thread, since the bias
// and aux pointers are attributes of the matmul descriptor, set on every call.
struct Plan {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  bool bias_epilogue = false;
  // A GemmEpilogue's problem (Problem::epilogue) that cuBLASLt refused: no
  // algorithm, or none ran. No descriptors; its calls run unfused.
  bool refused = false;
  // The heuristic's best candidates, best first; the first call times them
  // (tune) and keeps the fastest in algo.
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;
  bool tuned = false;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

Plan& plan_for(const Problem& p);

// Plans created by this thread (gemm's plans_created).
int64_t plans_created_here();

// The workspace of one call, from the caching allocator on the context's
// stream. Released when the call is enqueued: the block goes back to the cache
// of that stream, whose later work runs after these matmuls.
struct Workspace {
  Workspace(const ExecContext& ec, size_t bytes) : device(ec.device()) {
    if (bytes == 0) return;
    const weft::cuda::ScopedAllocationStream on_stream(ec.stream());
    ptr = weft::cuda::allocate(device, bytes);
  }
  ~Workspace() {
    if (ptr) weft::cuda::release(ptr, device);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  Device device;
  void* ptr = nullptr;
};

cudaDataType_t cuda_type(DType t);

// The largest power of two (at most 256) dividing every value: the alignment
// in bytes of addresses base + i·step for all steps.
int64_t alignment(std::initializer_list<uint64_t> values);

// A weft matrix (row-major view with strides) as the cuBLASLt operand that,
// with its op, is the matrix's transpose: cuBLASLt is column-major, so weft's
// c = a·b is computed as cᵀ = bᵀ·aᵀ.
Layout layout_of(const StridedMatrices& s, int64_t batch, int64_t stride, int64_t outer_stride);

// Times the plan's candidates on this call's operands (the output into
// scratch memory, so an accumulating call's c is untouched; an aux or bias
// gradient output is written, and the call itself writes it again) and keeps
// the fastest: the heuristic's first pick is not always the fastest on a
// given shape. A GEMM of 10-20 us timed three times picked by noise, so the
// candidates are timed in alternation, round after round (drift in clocks
// hits all alike), a sample being ~kSampleMs of back-to-back runs between
// two events, until each has kMinSamples samples and kTuneWorkMs of runs;
// the medians decide, and the heuristic's first stays unless another is
// more than kClearlyFaster faster. Synchronizes the stream once per round,
// on the first call of a shape and thread; a candidate that fails to run is
// dropped. A GemmEpilogue's plan none of whose candidates runs is refused.
void tune(Plan& plan, const ExecContext& ec, const Problem& p, const void* pa, const void* pb,
          float alpha);

}  // namespace weft::kernels::impl::lt
