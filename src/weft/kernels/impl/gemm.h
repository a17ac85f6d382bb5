// The implementations of kernels/gemm.h, one template per kernel:
// kernels/cpu/gemm.cpp and kernels/cuda/ define the Backend::cpu and
// Backend::cuda specializations. Only kernels/gemm.cpp calls them, after
// checking the arguments.
//
// Matrix products (kernels/gemm.h): oneDNN matmul primitives cached per thread
// on the CPU; cuBLASLt with f32 accumulation on CUDA (CUBLAS_COMPUTE_32F, also
// for f32 inputs: no TF32, so results agree with the CPU's to f32 accuracy),
// enqueued on the context's stream, descriptors and algorithm cached per shape
// and thread.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/dispatch.h"
#include "weft/kernels/gemm.h"

namespace weft::kernels::impl {

template <Backend B>
void gemm(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& c,
          const GemmOptions& opt);
template <Backend B>
void batched_gemm(const ExecContext& ec, const StridedMatrices& a, const StridedMatrices& b,
                  const StridedMatrices& c, float alpha = 1.0f, bool accumulate = false);

template <Backend B>
void quantized_gemm(const ExecContext& ec, const QuantizedOperand& a, const QuantizedOperand& b,
                    Tensor& c, const QuantizedGemmOptions& opt);

// Matmul plans created so far by the calling thread (oneDNN primitives on the
// CPU; cuBLASLt descriptors and algorithm on CUDA): a steady state creates
// none.
template <Backend B>
int64_t plans_created();

}  // namespace weft::kernels::impl
