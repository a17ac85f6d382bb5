// What the cuBLASLt GEMMs (kernels/cuda/gemm.cpp) need around cuBLASLt,
// compiled by nvcc in kernels/cuda/gemm_convert.cu. No CUDA header is
// included here.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/gemm.h"

namespace weft::kernels::cuda {

// dst = src (+ bias[col] when bias is not null) for every entry of the
// matrices (same batch and shape), converting between f32 and bf16, on the
// context's stream; dst may be src. For a bias whose type cuBLASLt's epilogue
// does not take, and an f32 product for a bf16 output of f32 inputs.
void convert_matrices(const ExecContext& ec, const StridedMatrices& src, const StridedMatrices& dst,
                      const void* bias, DType bias_type);

}  // namespace weft::kernels::cuda
