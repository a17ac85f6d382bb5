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
// A GEMM with an epilogue (opt.epilogue is not none; kernels/gemm.cpp has
// checked the arguments): true when the backend computed it fused, false when
// it did nothing (kernels/gemm.cpp then runs the unfused sequence).
// gemm_epilogue_fused: whether gemm_epilogue would fuse this call.
template <Backend B>
bool gemm_epilogue(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& c,
                   const GemmOptions& opt);
template <Backend B>
bool gemm_epilogue_fused(const ExecContext& ec, const Tensor& a, const Tensor& b, const Tensor& c,
                         const GemmOptions& opt);
template <Backend B>
void batched_gemm(const ExecContext& ec, const StridedMatrices& a, const StridedMatrices& b,
                  const StridedMatrices& c, float alpha = 1.0f, bool accumulate = false);

template <Backend B>
void quantized_gemm(const ExecContext& ec, const QuantizedOperand& a, const QuantizedOperand& b,
                    Tensor& c, const QuantizedGemmOptions& opt);

// The CPU's packed b operands (kernels::PackedWeight; nothing is packed on
// CUDA). pack_b_cpu: op(b) (b bf16, k x n) in oneDNN's layout for bf16
// products into `packed` (bytes, reallocated when the size differs); false
// when oneDNN reads this operand plain (then nothing is written).
bool pack_b_cpu(const ExecContext& ec, const Tensor& b, bool trans_b, Tensor& packed);
// c = alpha · a · op(plain) (+ c), op(plain) read from `packed`, or from
// `plain` where oneDNN would use another layout or kernel for this shape.
void gemm_packed_cpu(const ExecContext& ec, const Tensor& a, const Tensor& plain, bool trans_b,
                     const Tensor& packed, Tensor& c, const GemmOptions& opt);

// Matmul plans created so far by the calling thread (oneDNN primitives on the
// CPU; cuBLASLt descriptors and algorithm on CUDA): a steady state creates
// none.
template <Backend B>
int64_t plans_created();

}  // namespace weft::kernels::impl
