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

// c (rows, cols; row stride ldc) += bias (cols) on every row, on the context's
// stream: the bias of a GEMM whose types cuBLASLt's bias epilogue does not take.
void add_bias_rows(const ExecContext& ec, void* c, DType c_type, const void* bias, DType bias_type,
                   int64_t rows, int64_t cols, int64_t ldc);

}  // namespace weft::kernels::cuda
