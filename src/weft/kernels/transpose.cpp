#include "weft/kernels/transpose.h"

#include "weft/kernels/cpu/transpose.h"
#include "weft/kernels/cuda/transpose.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

void transpose01(const ExecContext& ec, const Tensor& in, Tensor& out) {
  return detail::dispatch(
      ec, "transpose01", {&in, &out}, [&] { return cpu::transpose01(ec, in, out); },
      [&] { return cuda::transpose01(ec, in, out); });
}

}  // namespace weft::kernels
