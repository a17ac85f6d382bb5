// The CPU implementations of kernels/gemm.h (oneDNN matmul primitives, cached per thread); callers
// go through kernels/gemm.h, which checks the devices and dispatches here.
#pragma once

#include "weft/core/exec_context.h"
#include "weft/kernels/gemm.h"

namespace weft::kernels::cpu {

void gemm(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& c,
          const GemmOptions& opt);
void batched_gemm(const ExecContext& ec, const StridedMatrices& a, const StridedMatrices& b,
                  const StridedMatrices& c, float alpha = 1.0f, bool accumulate = false);

// Primitives created so far by the calling thread's cache.
int64_t primitives_created();

}  // namespace weft::kernels::cpu
