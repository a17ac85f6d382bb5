#include "weft/kernels/random.h"

#include "weft/kernels/cpu/random.h"
#include "weft/kernels/cuda/random.h"
#include "weft/kernels/dispatch.h"

namespace weft::kernels {

void fill_uniform(const ExecContext& ec, uint64_t seed, uint64_t offset, Tensor& out) {
  return detail::dispatch(
      ec, "fill_uniform", {&out}, [&] { return cpu::fill_uniform(ec, seed, offset, out); },
      [&] { return cuda::fill_uniform(ec, seed, offset, out); });
}

void dropout_forward(const ExecContext& ec, const Tensor& x, float p, uint64_t seed,
                     uint64_t offset, Tensor& y, Tensor& mask) {
  return detail::dispatch(
      ec, "dropout_forward", {&x, &y, &mask},
      [&] { return cpu::dropout_forward(ec, x, p, seed, offset, y, mask); },
      [&] { return cuda::dropout_forward(ec, x, p, seed, offset, y, mask); });
}

void dropout_backward(const ExecContext& ec, const Tensor& dy, const Tensor& mask, float p,
                      Tensor& dx) {
  return detail::dispatch(
      ec, "dropout_backward", {&dy, &mask, &dx},
      [&] { return cpu::dropout_backward(ec, dy, mask, p, dx); },
      [&] { return cuda::dropout_backward(ec, dy, mask, p, dx); });
}

}  // namespace weft::kernels
