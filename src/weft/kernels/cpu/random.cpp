#include "weft/kernels/impl/random.h"

#include <algorithm>

#include "weft/core/exec_context.h"
#include "weft/kernels/elementwise.h"

namespace weft::kernels::impl {

namespace {

using detail::from_f32;
using detail::ptr;
using detail::to_f32;

// Elements per parallel task: large enough to amortize scheduling, a multiple
// of 4 so that tasks do not split Philox blocks (the numbers would be the same
// either way; only the work would be repeated).
constexpr int64_t kChunk = 1 << 14;

// Calls body(begin, end) over [0, n) in chunks spread across the caller's threads.
template <typename Body>
void parallel_chunks(const ExecContext& ec, int64_t n, Body&& body) {
  int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) body(c * kChunk, std::min(n, (c + 1) * kChunk));
}

}  // namespace

template <>
void fill_uniform<Backend::cpu>(const ExecContext& ec, uint64_t seed, uint64_t offset,
                                Tensor& out) {
  float* o = out.data<float>();
  parallel_chunks(ec, out.numel(), [&](int64_t begin, int64_t end) {
    for_each_uniform(seed, offset + static_cast<uint64_t>(begin), end - begin,
                     [&](int64_t i, float u) { o[begin + i] = u; });
  });
}

template <>
void dropout_forward<Backend::cpu>(const ExecContext& ec, const Tensor& x, float p, uint64_t seed,
                                   uint64_t offset, Tensor& y, Tensor& mask) {
  uint8_t* m = mask.data<uint8_t>();
  if (p == 0.0f) {
    y.copy_from(x);
    std::fill(m, m + mask.numel(), uint8_t{1});
    return;
  }
  const float scale = 1.0f / (1.0f - p);
  detail::dispatch_float(x.dtype(), [&]<typename T>() {
    const T* xs = ptr<T>(x);
    T* ys = ptr<T>(y);
    parallel_chunks(ec, x.numel(), [&](int64_t begin, int64_t end) {
      for_each_uniform(seed, offset + static_cast<uint64_t>(begin), end - begin,
                       [&](int64_t i, float u) {
                         int64_t k = begin + i;
                         bool keep = u >= p;
                         m[k] = keep;
                         ys[k] = from_f32<T>(keep ? to_f32(xs[k]) * scale : 0.0f);
                       });
    });
  });
}

template <>
void dropout_backward<Backend::cpu>(const ExecContext& ec, const Tensor& dy, const Tensor& mask,
                                    float p, Tensor& dx) {
  const float scale = 1.0f / (1.0f - p);
  const uint8_t* m = mask.data<uint8_t>();
  detail::dispatch_float(dy.dtype(), [&]<typename T>() {
    const T* g = ptr<T>(dy);
    T* out = ptr<T>(dx);
    parallel_chunks(ec, dy.numel(), [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        out[k] = from_f32<T>(m[k] ? to_f32(g[k]) * scale : 0.0f);
      }
    });
  });
}

}  // namespace weft::kernels::impl
