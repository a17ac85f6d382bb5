#include "weft/kernels/transpose.h"

#include "weft/kernels/cpu/transpose.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

void transpose01(const ExecContext& ec, const Tensor& in, Tensor& out) {
  const Device device = detail::kernel_device(ec, "transpose01", {&in, &out});
  if (device.is_cpu()) return cpu::transpose01(ec, in, out);
  detail::no_kernel("transpose01", device);
}

}  // namespace weft::kernels
