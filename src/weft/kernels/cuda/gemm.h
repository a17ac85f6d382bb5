// The CUDA implementations of kernels/gemm.h: cuBLASLt matmuls with f32
// accumulation (CUBLAS_COMPUTE_32F, also for f32 inputs: no TF32, so results
// agree with the CPU's to f32 accuracy). Callers go through kernels/gemm.h,
// which checks the devices and dispatches here. Compiled only in builds with
// the CUDA backend; no CUDA header is included here.
//
// Every call enqueues on the context's stream and returns without waiting.
// Descriptors and the chosen algorithm are created once per shape and cached
// per thread, the workspace comes from weft's caching allocator on the
// context's stream: a steady-state call creates and allocates nothing.
#pragma once

#include <cstdint>

#include "weft/core/exec_context.h"
#include "weft/kernels/gemm.h"

namespace weft::kernels::cuda {

void gemm(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& c,
          const GemmOptions& opt);
void batched_gemm(const ExecContext& ec, const StridedMatrices& a, const StridedMatrices& b,
                  const StridedMatrices& c, float alpha = 1.0f, bool accumulate = false);

// Matmul plans (descriptors + algorithm) created so far by the calling thread.
int64_t gemm_plans_created();

// dst = src (+ bias[col] when bias is not null) for every entry of the
// matrices (same batch and shape), converting between f32 and bf16, on the
// context's stream; dst may be src. What the GEMMs need around cuBLASLt: a
// bias whose type its epilogue does not take, an f32 product for a bf16
// output of f32 inputs.
void convert_matrices(const ExecContext& ec, const StridedMatrices& src, const StridedMatrices& dst,
                      const void* bias, DType bias_type);

}  // namespace weft::kernels::cuda
