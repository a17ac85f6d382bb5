#include "weft/kernels/gemm.h"

#include "weft/kernels/cpu/gemm.h"
#include "weft/kernels/cuda/gemm.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

void gemm(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& c,
          const GemmOptions& opt) {
  return detail::dispatch(
      ec, "gemm", {&a, &b, &c, opt.bias}, [&] { return cpu::gemm(ec, a, b, c, opt); },
      [&] { return cuda::gemm(ec, a, b, c, opt); });
}

void batched_gemm(const ExecContext& ec, const StridedMatrices& a, const StridedMatrices& b,
                  const StridedMatrices& c, float alpha, bool accumulate) {
  return detail::dispatch(
      ec, "batched_gemm", {}, [&] { return cpu::batched_gemm(ec, a, b, c, alpha, accumulate); },
      [&] { return cuda::batched_gemm(ec, a, b, c, alpha, accumulate); });
}

int64_t gemm_primitives_created() { return cpu::primitives_created(); }

}  // namespace weft::kernels
