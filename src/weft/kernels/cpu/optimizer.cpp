#include "weft/kernels/impl/optimizer.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "weft/core/exec_context.h"
#include "weft/kernels/cpu/clones.h"

namespace weft::kernels::impl {

namespace {

// Below this many elements in all a parallel region costs more than it
// saves; the results do not depend on it.
constexpr int64_t kParallelMin = 1 << 15;

// A sum of squares adds fixed blocks of its tensor, each in a fixed order of
// kLanes lanes, then the block sums in block order: the same result for any
// thread count and any list the tensor is part of.
constexpr int64_t kSumBlock = 1 << 16;
constexpr int kLanes = 8;

// Pieces of work laid end to end: piece i covers elements [starts[i],
// starts[i + 1]) of the concatenation. Part `part` of `parts` takes the
// elements [total·part/parts, total·(part+1)/parts) — an even share of the
// elements, however the pieces are sized — as (piece, first, last) runs,
// first and last relative to the piece, handed to `fn` in order.
template <typename Fn>
inline void for_share(const std::vector<int64_t>& starts, int part, int parts, Fn&& fn) {
  const int64_t total = starts.back();
  const int64_t begin = total * part / parts, end = total * (part + 1) / parts;
  if (begin >= end) return;
  // The last piece starting at or before `begin` (past any empty ones).
  size_t i = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), begin) -
                                 starts.begin() - 1);
  for (int64_t at = begin; at < end; ++i) {
    const int64_t last = std::min(end, starts[i + 1]);
    if (last > at) fn(i, at - starts[i], last - starts[i]);
    at = std::max(at, last);
  }
}

// Where each of `sizes` starts in their concatenation, and the total last.
std::vector<int64_t> starts_of(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> starts(sizes.size() + 1, 0);
  for (size_t i = 0; i < sizes.size(); ++i) starts[i + 1] = starts[i] + sizes[i];
  return starts;
}

int parts_for(const ExecContext& ec, int64_t total) {
  return total >= kParallelMin ? std::max(ec.threads(), 1) : 1;
}

// One AdamW segment as raw pointers.
struct AdamWRun {
  float* p;
  const float* g;
  float* m;
  float* v;
  float decay;  // 1 - lr · weight_decay, or 1 for a segment without decay
};

// Elements [first, last) of one segment: the update of kernels/optimizer.h,
// each operation rounded on its own (this file is compiled without FMA
// contraction, see CMakeLists.txt), so every vector width and every
// processor gives the bits of the scalar loop.
inline void adamw_elements(const AdamWRun& r, int64_t first, int64_t last,
                           const AdamWConstants& c) {
  float* p = r.p;
  const float* g = r.g;
  float* mp = r.m;
  float* vp = r.v;
  const float b1 = c.b1, a1 = c.a1, b2 = c.b2, a2 = c.a2, scale = c.scale, decay = r.decay;
  const float step_size = c.step_size, inv_sqrt_bias2 = c.inv_sqrt_bias2, eps = c.eps;
#pragma omp simd
  for (int64_t i = first; i < last; ++i) {
    const float gi = g[i] * scale;
    const float mi = b1 * mp[i] + a1 * gi;
    const float vi = b2 * vp[i] + a2 * gi * gi;
    mp[i] = mi;
    vp[i] = vi;
    p[i] = p[i] * decay - step_size * mi / (std::sqrt(vi) * inv_sqrt_bias2 + eps);
  }
}

// Every segment's elements, an even share of them per thread, on the
// instruction set the processor has.
WEFT_ROW_CLONES void adamw_runs(const std::vector<AdamWRun>& runs,
                                const std::vector<int64_t>& starts, const AdamWConstants& c,
                                int parts) {
#pragma omp parallel for num_threads(parts) schedule(static)
  for (int part = 0; part < parts; ++part) {
    for_share(starts, part, parts, [&](size_t i, int64_t first, int64_t last) {
      adamw_elements(runs[i], first, last, c);
    });
  }
}

// Σ x² over x[0, n) in kLanes f64 lanes (a square of an f32 is exact in
// f64), the lanes added in order.
inline double block_sum_of_squares(const float* x, int64_t n) {
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const double xi = x[i + l];
      lane[l] += xi * xi;
    }
  }
  for (int l = 0; i < n; ++i, ++l) {
    const double xi = x[i];
    lane[l] += xi * xi;
  }
  double s = 0.0;
  for (double part : lane) s += part;
  return s;
}

// partial[b] = the sum of squares of block b (blocks[b] points at it,
// starts[b + 1] - starts[b] long); each thread takes the blocks that start in
// its even share of the elements.
WEFT_ROW_CLONES void block_sums(const std::vector<const float*>& blocks,
                                const std::vector<int64_t>& starts, std::vector<double>& partial,
                                int parts) {
  const int64_t total = starts.back();
#pragma omp parallel for num_threads(parts) schedule(static)
  for (int part = 0; part < parts; ++part) {
    const auto first = std::lower_bound(starts.begin(), starts.end() - 1, total * part / parts);
    const auto last = std::lower_bound(first, starts.end() - 1, total * (part + 1) / parts);
    for (auto b = static_cast<size_t>(first - starts.begin());
         b < static_cast<size_t>(last - starts.begin()); ++b) {
      partial[b] = block_sum_of_squares(blocks[b], starts[b + 1] - starts[b]);
    }
  }
}

}  // namespace

template <>
void adamw_step_multi<Backend::cpu>(const ExecContext& ec, std::span<const AdamWSegment> segments,
                                    const AdamWConfig& cfg) {
  AdamWConstants c = adamw_constants(cfg);
  if (cfg.grad_scale_from) {
    c.scale = *cfg.grad_scale_from->data<float>();
    if (std::isnan(c.scale)) return;  // the step is skipped (kernels/optimizer.h)
  }
  std::vector<AdamWRun> runs;
  std::vector<int64_t> sizes;
  runs.reserve(segments.size());
  sizes.reserve(segments.size());
  for (const AdamWSegment& s : segments) {
    runs.push_back({.p = s.params->data<float>(),
                    .g = s.grads->data<float>(),
                    .m = s.m->data<float>(),
                    .v = s.v->data<float>(),
                    .decay = s.decay ? c.decay : 1.0f});
    sizes.push_back(s.params->numel());
  }
  const std::vector<int64_t> starts = starts_of(sizes);
  adamw_runs(runs, starts, c, parts_for(ec, starts.back()));
}

template <>
std::vector<double> sum_of_squares_multi<Backend::cpu>(const ExecContext& ec,
                                                       std::span<const Tensor> xs) {
  // Every tensor's fixed blocks, laid end to end.
  std::vector<const float*> blocks;
  std::vector<int64_t> sizes, first_block(xs.size() + 1, 0);
  for (size_t i = 0; i < xs.size(); ++i) {
    const float* x = xs[i].data<float>();
    const int64_t n = xs[i].numel();
    for (int64_t begin = 0; begin < n; begin += kSumBlock) {
      blocks.push_back(x + begin);
      sizes.push_back(std::min(kSumBlock, n - begin));
    }
    first_block[i + 1] = static_cast<int64_t>(blocks.size());
  }
  const std::vector<int64_t> starts = starts_of(sizes);
  std::vector<double> partial(blocks.size());
  // No more threads than blocks: a block is one thread's work.
  const int parts = static_cast<int>(
      std::min<int64_t>(parts_for(ec, starts.back()), std::max<int64_t>(1, blocks.size())));
  block_sums(blocks, starts, partial, parts);
  std::vector<double> sums(xs.size(), 0.0);
  for (size_t i = 0; i < xs.size(); ++i) {
    double total = 0.0;
    for (int64_t b = first_block[i]; b < first_block[i + 1]; ++b) {
      total += partial[static_cast<size_t>(b)];
    }
    sums[i] = total;
  }
  return sums;
}

template <>
void sum_of_squares_total<Backend::cpu>(const ExecContext& ec, std::span<const Tensor> xs,
                                        Tensor& total) {
  double t = 0.0;
  for (double s : sum_of_squares_multi<Backend::cpu>(ec, xs)) t += s;
  *total.data<double>() = t;
}

}  // namespace weft::kernels::impl
