#include "weft/kernels/impl/activation.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "weft/core/exec_context.h"
#include "weft/kernels/cpu/clones.h"
#include "weft/kernels/cpu/onednn.h"
#include "weft/kernels/elementwise.h"

namespace weft::kernels::impl {

namespace {

using detail::BF16;
using detail::from_f32;
using detail::ptr;
using detail::to_f32;
using dnnl::memory;

constexpr int64_t kBlockRows = 64;

// GELU forward and backward primitives, cached per (size, dtype, threads).
struct GeluEntry {
  dnnl::eltwise_forward fwd;
  dnnl::eltwise_backward bwd;
  memory src, dst, diff_dst, diff_src;
};

// (elements, dtype, threads): a key of three fields, so no thread count can
// collide with another dtype's entry.
struct GeluKey {
  int64_t n;
  DType dtype;
  int threads;
  bool operator==(const GeluKey&) const = default;
};

struct GeluKeyHash {
  size_t operator()(const GeluKey& k) const {
    return std::hash<int64_t>()(k.n) * 31 + static_cast<size_t>(k.dtype) * 7919 +
           static_cast<size_t>(k.threads);
  }
};

GeluEntry& gelu_entry(const ExecContext& ec, int64_t n, DType dt) {
  thread_local std::unordered_map<GeluKey, GeluEntry, GeluKeyHash> cache;
  const GeluKey key{n, dt, cpu::apply_thread_budget(ec)};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  memory::desc md({n}, cpu::to_dnnl(dt), memory::format_tag::a);
  auto alg = dnnl::algorithm::eltwise_gelu_tanh;
  dnnl::eltwise_forward::primitive_desc fpd({dnnl::prop_kind::forward_training, alg, md, 0.f, 0.f},
                                            cpu::engine());
  dnnl::eltwise_backward::primitive_desc bpd({alg, md, md, 0.f, 0.f}, cpu::engine(), fpd);
  GeluEntry e{dnnl::eltwise_forward(fpd),         dnnl::eltwise_backward(bpd),
              memory(md, cpu::engine(), nullptr), memory(md, cpu::engine(), nullptr),
              memory(md, cpu::engine(), nullptr), memory(md, cpu::engine(), nullptr)};
  return cache.emplace(key, std::move(e)).first->second;
}

void execute(const dnnl::primitive& p, const dnnl_exec_arg_t* args, int n) {
  dnnl_status_t st = dnnl_primitive_execute(p.get(), cpu::stream().get(), n, args);
  WEFT_CHECK(st == dnnl_success, "oneDNN eltwise failed with status {}", static_cast<int>(st));
  cpu::stream().wait();
}

}  // namespace

template <>
void gelu_forward<Backend::cpu>(const ExecContext& ec, const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  if (n == 0) return;
  // Without native bf16 eltwise, the f32 primitive on the widened values, one
  // rounding at the end, as the native bf16 primitive computes.
  const bool emulate = x.dtype() == DType::bf16 && cpu::emulate_bf16();
  GeluEntry& e = gelu_entry(ec, n, emulate ? DType::f32 : x.dtype());
  float* xs = emulate ? cpu::staging(0, n) : nullptr;
  float* ys = emulate ? cpu::staging(1, n) : nullptr;
  if (emulate) cpu::widen_bf16(ec, x.bf16_data(), xs, n);
  e.src.set_data_handle(emulate ? xs : x.raw());
  e.dst.set_data_handle(emulate ? ys : y.raw());
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, e.src.get()}, {DNNL_ARG_DST, e.dst.get()}};
  execute(e.fwd, args, 2);
  if (emulate) cpu::narrow_to_bf16(ec, ys, y.bf16_data(), n);
}

template <>
void gelu_backward<Backend::cpu>(const ExecContext& ec, const Tensor& dy, const Tensor& x,
                                 Tensor& dx) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const bool emulate = x.dtype() == DType::bf16 && cpu::emulate_bf16();
  GeluEntry& e = gelu_entry(ec, n, emulate ? DType::f32 : x.dtype());
  float* xs = emulate ? cpu::staging(0, n) : nullptr;
  float* dys = emulate ? cpu::staging(1, n) : nullptr;
  float* dxs = emulate ? cpu::staging(2, n) : nullptr;
  if (emulate) {
    cpu::widen_bf16(ec, x.bf16_data(), xs, n);
    cpu::widen_bf16(ec, dy.bf16_data(), dys, n);
  }
  e.src.set_data_handle(emulate ? xs : x.raw());
  e.diff_dst.set_data_handle(emulate ? dys : dy.raw());
  e.diff_src.set_data_handle(emulate ? dxs : dx.raw());
  dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, e.src.get()},
                             {DNNL_ARG_DIFF_DST, e.diff_dst.get()},
                             {DNNL_ARG_DIFF_SRC, e.diff_src.get()}};
  execute(e.bwd, args, 3);
  if (emulate) cpu::narrow_to_bf16(ec, dxs, dx.bf16_data(), n);
}

namespace {

// σ(g) = 1 / (1 + e^-g) without a call, so that the row loops vectorize
// (std::exp does not without -ffast-math): detail::exp_in_range of -g with |g|
// clamped to 87. Above 87 σ is 1 within f32; below -87 it is a denormal or
// less, and 0 is returned, as the exact quotient gives once e^-g overflows.
// Bit-pattern integer operations stand in for float compares, which do not
// vectorize under -ftrapping-math; a NaN gate still gives NaN results through
// the factors g below.
inline float sigmoid(float g) {
  constexpr uint32_t kLimit = std::bit_cast<uint32_t>(87.0f);
  const uint32_t bits = std::bit_cast<uint32_t>(g);
  const uint32_t mag = bits & 0x7fffffffu;
  const float clamped = std::bit_cast<float>((bits & 0x80000000u) | std::min(mag, kLimit));
  const float s = 1.0f / (1.0f + detail::exp_in_range(-clamped));
  const uint32_t keep = ((bits >> 31) & static_cast<uint32_t>(mag > kLimit)) ? 0u : ~0u;
  return std::bit_cast<float>(std::bit_cast<uint32_t>(s) & keep);
}

// out[j] = silu(gate[j]) · up[j] over one row.
template <typename T>
inline void swiglu_row(const T* gate, const T* up, T* out, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const float g = to_f32(gate[j]);
    out[j] = from_f32<T>(g * sigmoid(g) * to_f32(up[j]));
  }
}

// dgate[j] = dy·up·silu'(gate), dup[j] = dy·silu(gate) over one row;
// silu'(g) = σ(g)·(1 + g·(1 − σ(g))).
template <typename T>
inline void swiglu_grad_row(const T* gate, const T* up, const T* dy, T* dgate, T* dup, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const float g = to_f32(gate[j]), u = to_f32(up[j]), grad = to_f32(dy[j]);
    const float s = sigmoid(g);
    dgate[j] = from_f32<T>(grad * u * (s * (1.0f + g * (1.0f - s))));
    dup[j] = from_f32<T>(grad * (g * s));
  }
}

// The rows of a [gate | up] tensor (rows, 2n) into (rows, n), on the
// instruction set the processor has.
WEFT_ROW_CLONES void swiglu_rows(const float* gu, float* out, int64_t rows, int64_t n,
                                 int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t r = 0; r < rows; ++r) swiglu_row(gu + r * 2 * n, gu + r * 2 * n + n, out + r * n, n);
}
WEFT_ROW_CLONES void swiglu_rows(const BF16* gu, BF16* out, int64_t rows, int64_t n, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t r = 0; r < rows; ++r) swiglu_row(gu + r * 2 * n, gu + r * 2 * n + n, out + r * n, n);
}

WEFT_ROW_CLONES void swiglu_grad_rows(const float* gu, const float* dy, float* dgu, int64_t rows,
                                      int64_t n, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    swiglu_grad_row(gu + r * 2 * n, gu + r * 2 * n + n, dy + r * n, dgu + r * 2 * n,
                    dgu + r * 2 * n + n, n);
  }
}
WEFT_ROW_CLONES void swiglu_grad_rows(const BF16* gu, const BF16* dy, BF16* dgu, int64_t rows,
                                      int64_t n, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    swiglu_grad_row(gu + r * 2 * n, gu + r * 2 * n + n, dy + r * n, dgu + r * 2 * n,
                    dgu + r * 2 * n + n, n);
  }
}

}  // namespace

template <>
void swiglu_forward<Backend::cpu>(const ExecContext& ec, const Tensor& gu, Tensor& out) {
  const int64_t n = out.shape().last(), rows = n == 0 ? 0 : out.numel() / n;
  detail::dispatch_float(gu.dtype(), [&]<typename T>() {
    swiglu_rows(ptr<T>(gu), ptr<T>(out), rows, n, ec.threads());
  });
}

template <>
void swiglu_backward<Backend::cpu>(const ExecContext& ec, const Tensor& dy, const Tensor& gu,
                                   Tensor& dgu) {
  const int64_t n = dy.shape().last(), rows = n == 0 ? 0 : dy.numel() / n;
  detail::dispatch_float(gu.dtype(), [&]<typename T>() {
    swiglu_grad_rows(ptr<T>(gu), ptr<T>(dy), ptr<T>(dgu), rows, n, ec.threads());
  });
}

template <>
void bias_add<Backend::cpu>(const ExecContext& ec, Tensor& y, const Tensor& bias) {
  const int64_t n = y.shape().rows(), c = y.shape().last();
  const float* b = bias.data<float>();
  detail::dispatch_float(y.dtype(), [&]<typename T>() {
    T* yp = ptr<T>(y);
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
    for (int64_t r = 0; r < n; ++r) {
      T* row = yp + r * c;
      for (int64_t j = 0; j < c; ++j) row[j] = from_f32<T>(to_f32(row[j]) + b[j]);
    }
  });
}

template <>
void bias_backward<Backend::cpu>(const ExecContext& ec, const Tensor& dy, Tensor& dbias) {
  const int64_t n = dy.shape().rows(), c = dy.shape().last();
  const int64_t nblocks = (n + kBlockRows - 1) / kBlockRows;
  thread_local std::vector<float> part;
  if (part.size() < static_cast<size_t>(nblocks * c)) part.resize(static_cast<size_t>(nblocks * c));
  float* partial = part.data();
  detail::dispatch_float(dy.dtype(), [&]<typename T>() {
    const T* dp = ptr<T>(dy);
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
    for (int64_t b = 0; b < nblocks; ++b) {
      float* pb = partial + b * c;
      for (int64_t j = 0; j < c; ++j) pb[j] = 0.f;
      for (int64_t r = b * kBlockRows; r < std::min(n, (b + 1) * kBlockRows); ++r)
        for (int64_t j = 0; j < c; ++j) pb[j] += to_f32(dp[r * c + j]);
    }
  });
  float* db = dbias.data<float>();
  for (int64_t b = 0; b < nblocks; ++b)
    for (int64_t j = 0; j < c; ++j) db[j] += partial[b * c + j];
}

template <>
void add<Backend::cpu>(const ExecContext& ec, const Tensor& a, const Tensor& b, Tensor& out) {
  const int64_t n = a.numel();
  detail::dispatch_float(a.dtype(), [&]<typename T>() {
    const T* ap = ptr<T>(a);
    const T* bp = ptr<T>(b);
    T* op = ptr<T>(out);
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
    for (int64_t i = 0; i < n; ++i) op[i] = from_f32<T>(to_f32(ap[i]) + to_f32(bp[i]));
  });
}

template <>
void axpy<Backend::cpu>(const ExecContext& ec, float alpha, const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  detail::dispatch_float(x.dtype(), [&]<typename TX>() {
    detail::dispatch_float(y.dtype(), [&]<typename TY>() {
      const TX* xp = ptr<TX>(x);
      TY* yp = ptr<TY>(y);
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
      for (int64_t i = 0; i < n; ++i) yp[i] = from_f32<TY>(to_f32(yp[i]) + alpha * to_f32(xp[i]));
    });
  });
}

template <>
void scale<Backend::cpu>(const ExecContext& ec, Tensor& y, float alpha) {
  const int64_t n = y.numel();
  detail::dispatch_float(y.dtype(), [&]<typename T>() {
    T* yp = ptr<T>(y);
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
    for (int64_t i = 0; i < n; ++i) yp[i] = from_f32<T>(to_f32(yp[i]) * alpha);
  });
}

}  // namespace weft::kernels::impl
