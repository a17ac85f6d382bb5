#include "weft/kernels/optimizer.h"

#include "weft/kernels/cpu/optimizer.h"
#include "weft/kernels/cuda/optimizer.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

void adamw_step(const ExecContext& ec, Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                const AdamWConfig& cfg) {
  return detail::dispatch(
      ec, "adamw_step", {&params, &grads, &m, &v},
      [&] { return cpu::adamw_step(ec, params, grads, m, v, cfg); },
      [&] { return cuda::adamw_step(ec, params, grads, m, v, cfg); });
}

double sum_of_squares(const ExecContext& ec, const Tensor& x) {
  return detail::dispatch(
      ec, "sum_of_squares", {&x}, [&] { return cpu::sum_of_squares(ec, x); },
      [&] { return cuda::sum_of_squares(ec, x); });
}

}  // namespace weft::kernels
