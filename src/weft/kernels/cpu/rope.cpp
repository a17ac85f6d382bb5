#include "weft/kernels/impl/rope.h"

#include "weft/kernels/elementwise.h"

namespace weft::kernels::impl {

template <>
void rope_rotate<Backend::cpu>(const ExecContext& ec, Tensor& qkv, const Tensor& table,
                               const RopeDims& d, float sign) {
  const int64_t rows = d.B * d.T, half = d.D / 2;
  const float* tab = table.data<float>();
  detail::dispatch_float(qkv.dtype(), [&]<typename T>() {
    T* base = detail::ptr<T>(qkv);
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      const float* angle = tab + d.position(row) * half * 2;
      for (int64_t h = 0; h < d.rotated_heads; ++h) {
        T* x = base + row * d.width + h * d.D;
        for (int64_t i = 0; i < half; ++i) {
          // Backward rotates by minus the angle: the same cos, sin negated.
          const float c = angle[2 * i], s = sign * angle[2 * i + 1];
          const float x1 = detail::to_f32(x[i]), x2 = detail::to_f32(x[i + half]);
          x[i] = detail::from_f32<T>(x1 * c - x2 * s);
          x[i + half] = detail::from_f32<T>(x2 * c + x1 * s);
        }
      }
    }
  });
}

}  // namespace weft::kernels::impl
