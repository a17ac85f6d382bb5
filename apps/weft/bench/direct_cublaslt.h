// The direct cuBLASLt matmul, called through cuBLASLt's own API: the yardstick
// of `weft bench gemm --device cuda`. Defined only in builds with the CUDA
// backend (WEFT_HAVE_CUDA); no CUDA header is included here.
#pragma once

#include <functional>
#include <memory>

#include "direct_gemm.h"
#include "weft/core/dtype.h"
#include "weft/kernels/gemm.h"

namespace weft {

// One cublasLtMatmul with its handle, descriptors, algorithm and workspace
// made once, for device pointers laid out as weft's gemm() takes them
// (row-major; a is (k, m) when s.trans_a, b is (n, k) when s.trans_b), with
// the same types and f32 accumulation (CUBLAS_COMPUTE_32F), beta = 1 when
// accumulating. Runs on `stream` (a cudaStream_t of GPU `device`).
// FP8 operands (e4m3 / e5m2 codes) with their device-side decode scales, for
// an FP8 matmul in the TN layout (s.trans_a false, s.trans_b true).
struct DirectFp8 {
  DType a_type = DType::e4m3, b_type = DType::e4m3;
  const void* a_scale_inv = nullptr;
  const void* b_scale_inv = nullptr;
  bool fast_accumulation = false;
};

// A cuBLASLt epilogue on the direct matmul, the yardstick of the epilogue
// rows: GELU_AUX(_BIAS) for GemmEpilogue::gelu_aux, DGELU(_BGRAD) for
// dgelu_bgrad, BGRADB for bgrad_a (cuBLASLt's B is weft's a). The bias and
// the bias gradient have the output's type (what cuBLASLt takes); aux is
// laid out as c (leading dimension n). Null pointers leave out BIAS / BGRAD.
struct DirectEpilogue {
  kernels::GemmEpilogue kind = kernels::GemmEpilogue::none;
  const void* bias = nullptr;
  void* aux = nullptr;
  void* bias_grad = nullptr;
};

class DirectCublasLt {
 public:
  DirectCublasLt(const GemmShape& s, DType in, DType out, const void* a, const void* b, void* c,
                 bool accumulate, void* stream, int device, const DirectFp8* fp8 = nullptr,
                 const DirectEpilogue* epilogue = nullptr);
  ~DirectCublasLt();
  DirectCublasLt(const DirectCublasLt&) = delete;
  DirectCublasLt& operator=(const DirectCublasLt&) = delete;
  void run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// GPU time per call of `fn`, which enqueues its work on `stream`: `iters`
// calls between two CUDA events on that stream, in seconds. Host time spent
// inside the calls counts where the GPU waits for it.
double cuda_seconds_per_call(void* stream, const std::function<void()>& fn, int iters);

}  // namespace weft
