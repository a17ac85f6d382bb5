// Generation's attention on the CPU (kernels/attention.h): the new rows'
// keys and values copied into the caches, and a few query rows run against
// the cached keys one (b, h, row) item at a time — dot products over the
// dense (L, D) key block of the row's key/value head, a softmax in f32 and
// the probabilities' sum of value rows. A step of generation has one row per
// sequence, which GEMM tiles would mostly pad.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "weft/kernels/cpu/attention_blocks.h"
#include "weft/kernels/cpu/attention_rows.h"
#include "weft/kernels/elementwise.h"
#include "weft/kernels/impl/attention.h"

namespace weft::kernels::impl {

namespace {

using namespace cpu::attention_blocks;
using namespace cpu::attention_rows;

// acc[0..n) += p · v[0..n)
inline void add_scaled(float* acc, float p, const float* v, int64_t n) {
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) acc[k] += p * v[k];
}
inline void add_scaled(float* acc, float p, const uint16_t* v, int64_t n) {
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) acc[k] += p * bf16_to_f32(v[k]);
}

// Multiply-adds below which a decode call runs on the calling thread.
constexpr int64_t kSerialWork = int64_t{1} << 16;

}  // namespace

template <>
void kv_cache_write<Backend::cpu>(const ExecContext& ec, const Tensor& qkv,
                                  std::span<const int64_t> start, const AttentionConfig& cfg,
                                  Tensor& k_cache, Tensor& v_cache) {
  const Dims d = detail::attention_dims(qkv, cfg);
  const int64_t L = k_cache.size(2), W = d.width(), size = element_bytes(qkv.dtype());
  const int64_t bytes = d.D * size;
  const char* src = static_cast<const char*>(qkv.raw());
  char* dst[2] = {static_cast<char*>(k_cache.raw()), static_cast<char*>(v_cache.raw())};
  // One item per (b, g, row): a head's D values, contiguous on both sides.
  const int64_t items = d.B * d.Hkv * d.T;
#pragma omp parallel for num_threads(ec.threads()) schedule(static) if (items > 64)
  for (int64_t i = 0; i < items; ++i) {
    const int64_t t = i % d.T, g = (i / d.T) % d.Hkv, b = i / (d.T * d.Hkv);
    const int64_t row = b * d.T + t, pos = start[static_cast<size_t>(b)] + t;
    for (int part = 1; part <= 2; ++part) {
      const char* from = src + (row * W + d.part_column(part) + g * d.D) * size;
      std::memcpy(dst[part - 1] + ((b * d.Hkv + g) * L + pos) * bytes, from,
                  static_cast<size_t>(bytes));
    }
  }
}

template <>
void attention_decode<Backend::cpu>(const ExecContext& ec, const Tensor& qkv,
                                    std::span<const int64_t> start, const AttentionConfig& cfg,
                                    const Tensor& k_cache, const Tensor& v_cache, Tensor& out,
                                    AttentionWorkspace& workspace) {
  const Dims d = detail::attention_dims(qkv, cfg);
  const int64_t L = k_cache.size(2), W = d.width();
  if (d.B * d.T == 0) return;
  // Per thread: the scores of one row over every cached position, and its
  // f32 output accumulator.
  Carve per_thread;
  per_thread.take<float>(L);
  per_thread.take<float>(d.D);
  const int threads = std::max(ec.threads(), 1);
  char* base = scratch(ec, workspace, threads * per_thread.used);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.D));
  detail::dispatch_float(qkv.dtype(), [&]<typename T>() {
    using R = Raw<T>;
    const R* q_all = detail::ptr<R>(qkv);
    const R* k_all = detail::ptr<R>(k_cache);
    const R* v_all = detail::ptr<R>(v_cache);
    R* o_all = detail::ptr<R>(out);
    // Items (b, h, t), the latest rows (which see the most keys) first.
    const int64_t items = d.B * d.H * d.T;
    auto item_of = [&](int64_t item, int thread) {
      const int64_t t = d.T - 1 - item / (d.B * d.H), bh = item % (d.B * d.H);
      const int64_t b = bh / d.H, h = bh % d.H, g = d.kv_head(h);
      const int64_t n = start[static_cast<size_t>(b)] + t + 1;
      Carve c{base + thread * per_thread.used};
      float* s = c.take<float>(L);
      float* acc = c.take<float>(d.D);
      const R* q = q_all + (b * d.T + t) * W + h * d.D;
      const R* k = k_all + (b * d.Hkv + g) * L * d.D;
      const R* v = v_all + (b * d.Hkv + g) * L * d.D;
      for (int64_t j = 0; j < n; ++j) s[j] = dot_row(q, k + j * d.D, d.D) * scale;
      float max = -std::numeric_limits<float>::infinity();
      const float sum = exp_row_online(s, n, &max);
      std::fill(acc, acc + d.D, 0.0f);
      for (int64_t j = 0; j < n; ++j) add_scaled(acc, s[j], v + j * d.D, d.D);
      R* o = o_all + (b * d.T + t) * d.C + h * d.D;
      scaled_row(acc, 1.0f / sum, o, d.D);
    };
    // A step's few rows over a short context are less work than waking the
    // thread team for them.
    int64_t longest = 0;
    for (const int64_t p : start) longest = std::max(longest, p);
    const int64_t work = items * (longest + d.T) * d.D;
    if (threads == 1 || work < kSerialWork) {
      for (int64_t i = 0; i < items; ++i) item_of(i, 0);
    } else {
      for_each_item(ec, items, item_of);
    }
  });
}

}  // namespace weft::kernels::impl
