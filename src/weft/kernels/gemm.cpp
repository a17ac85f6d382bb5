#include "weft/kernels/gemm.h"

#include "weft/kernels/cpu/gemm.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

void gemm(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& c,
          const GemmOptions& opt) {
  const Device device = detail::kernel_device(ec, "gemm", {&a, &b, &c, opt.bias});
  if (device.is_cpu()) return cpu::gemm(ec, a, b, c, opt);
  detail::no_kernel("gemm", device);
}

void batched_gemm(const ExecContext& ec, const StridedMatrices& a, const StridedMatrices& b,
                  const StridedMatrices& c, float alpha, bool accumulate) {
  const Device device = detail::kernel_device(ec, "batched_gemm", {});
  if (device.is_cpu()) return cpu::batched_gemm(ec, a, b, c, alpha, accumulate);
  detail::no_kernel("batched_gemm", device);
}

int64_t gemm_primitives_created() { return cpu::primitives_created(); }

}  // namespace weft::kernels
