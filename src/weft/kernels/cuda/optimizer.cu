#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "weft/core/cuda.h"
#include "weft/kernels/cuda/common.cuh"
#include "weft/kernels/impl/optimizer.h"

namespace weft::kernels::impl {

// The launch and element helpers of kernels/cuda/ (common.cuh and its kin).
using namespace cuda;

namespace {

// The multi-tensor launches (as Apex's multi_tensor_apply): the tensors are
// cut into chunks, each block of a launch takes one chunk of one tensor, and
// a launch carries its tensors' pointers and its blocks' (tensor, chunk)
// table by value in its arguments — no table to copy to the device, nothing
// for the host to wait on, so a step stays capturable in a CUDA graph. Lists
// longer than a launch holds go in several launches.
constexpr int kMaxTensors = 36;
constexpr int kMaxBlocks = 320;

constexpr int64_t kAdamWChunk = 1 << 16;
constexpr int kAdamWThreads = 512;
// Smaller chunks for the sums: more blocks for a lone large gradient.
constexpr int64_t kSumChunk = 1 << 14;
constexpr int kSumThreads = 256;

// The blocks of one launch: block b works on chunk chunk[b] of the launch's
// tensor slot tensor[b].
struct ChunkTable {
  uint8_t tensor[kMaxBlocks];
  int32_t chunk[kMaxBlocks];
};

struct AdamWLaunch {
  float* p[kMaxTensors];
  const float* g[kMaxTensors];
  float* m[kMaxTensors];
  float* v[kMaxTensors];
  int64_t n[kMaxTensors];
  float decay[kMaxTensors];
  ChunkTable blocks;
};

struct SumLaunch {
  const float* x[kMaxTensors];
  int64_t n[kMaxTensors];
  ChunkTable blocks;
};

// Kernel arguments are limited to 4 KiB.
static_assert(sizeof(AdamWLaunch) <= 4000 && sizeof(SumLaunch) <= 4000);
static_assert(kMaxTensors <= 255);

// Walks the chunks (of `chunk` elements) of tensors 0..count-1 of sizes
// size_of(i), filling launch tables (set_slot(L, slot, i) puts tensor i in
// slot `slot` of L) and calling launch(L, blocks) whenever one is full, in
// tensor and chunk order. A tensor cut between two launches takes slot 0 of
// the second.
template <typename Launch, typename SizeOf, typename SetSlot, typename Run>
void for_each_launch(size_t count, int64_t chunk, SizeOf&& size_of, SetSlot&& set_slot,
                     Run&& launch) {
  Launch table{};
  int slot = 0, blocks = 0;
  for (size_t i = 0; i < count; ++i) {
    const int64_t chunks = (size_of(i) + chunk - 1) / chunk;
    if (chunks == 0) continue;
    set_slot(table, slot, i);
    for (int64_t c = 0; c < chunks; ++c) {
      table.blocks.tensor[blocks] = static_cast<uint8_t>(slot);
      table.blocks.chunk[blocks] = static_cast<int32_t>(c);
      ++blocks;
      const bool last = c == chunks - 1;
      if (blocks == kMaxBlocks || (last && slot == kMaxTensors - 1)) {
        launch(table, blocks);
        blocks = 0;
        slot = last ? -1 : 0;
        if (!last) set_slot(table, 0, i);
      }
    }
    ++slot;
  }
  if (blocks > 0) launch(table, blocks);
}

// Each launch's tensors, chunk by chunk: the update of kernels/optimizer.h
// with every operation rounded on its own (_rn intrinsics: no FMA
// contraction, which the CPU loop does not have either), so each element is
// updated bit for bit as on the CPU.
// scale_from: the grad_scale on the device (AdamWConfig::grad_scale_from), or
// null for c.scale; a NaN there leaves everything as it is.
__global__ void adamw_multi_kernel(AdamWLaunch L, AdamWConstants c, const float* scale_from) {
  if (scale_from) {
    c.scale = *scale_from;
    if (isnan(c.scale)) return;
  }
  const int t = L.blocks.tensor[blockIdx.x];
  const int64_t begin = static_cast<int64_t>(L.blocks.chunk[blockIdx.x]) * kAdamWChunk;
  const int64_t end = min(L.n[t], begin + kAdamWChunk);
  float* p = L.p[t];
  const float* g = L.g[t];
  float* m = L.m[t];
  float* v = L.v[t];
  const float decay = L.decay[t];
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const float gi = __fmul_rn(g[i], c.scale);
    const float mi = __fadd_rn(__fmul_rn(c.b1, m[i]), __fmul_rn(c.a1, gi));
    const float vi = __fadd_rn(__fmul_rn(c.b2, v[i]), __fmul_rn(__fmul_rn(c.a2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    const float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(vi), c.inv_sqrt_bias2), c.eps);
    p[i] = __fsub_rn(__fmul_rn(p[i], decay), __fdiv_rn(__fmul_rn(c.step_size, mi), denom));
  }
}

// Sum of v over the block (blockDim.x == kSumThreads) in a fixed tree, the
// same for every run; every thread gets the result.
__device__ double block_sum_f64(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int half = kSumThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  return shared[0];
}

// partial[b] = Σ x² over the chunk of block b, squares and sums in f64 (a
// square of an f32 is exact in f64).
__global__ void sum_of_squares_multi_kernel(SumLaunch L, double* partial) {
  __shared__ double shared[kSumThreads];
  const int t = L.blocks.tensor[blockIdx.x];
  const int64_t begin = static_cast<int64_t>(L.blocks.chunk[blockIdx.x]) * kSumChunk;
  const int64_t end = min(L.n[t], begin + kSumChunk);
  const float* x = L.x[t];
  double acc = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kSumThreads) {
    const double xi = x[i];
    acc += xi * xi;
  }
  const double total = block_sum_f64(acc, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// The chunks of up to kSumsPerLaunch tensors: tensor `base + j` owns the
// chunk sums [first[j], first[j + 1]) of `partial`.
constexpr int kSumsPerLaunch = 512;
struct ChunkRanges {
  int32_t first[kSumsPerLaunch + 1];
};

// sums[base + j] = the chunk sums of tensor base + j added in chunk order,
// one thread per tensor.
__global__ void tensor_sums_kernel(const double* partial, ChunkRanges r, int count, double* sums) {
  const int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (j >= count) return;
  double total = 0.0;
  for (int32_t b = r.first[j]; b < r.first[j + 1]; ++b) total += partial[b];
  sums[j] = total;
}

}  // namespace

template <>
void adamw_step_multi<Backend::cuda>(const ExecContext& ec, std::span<const AdamWSegment> segments,
                                     const AdamWConfig& cfg) {
  // The per-step constants exactly as the CPU computes them.
  const AdamWConstants c = adamw_constants(cfg);
  for_each_launch<AdamWLaunch>(
      segments.size(), kAdamWChunk, [&](size_t i) { return segments[i].params->numel(); },
      [&](AdamWLaunch& L, int slot, size_t i) {
        const AdamWSegment& s = segments[i];
        L.p[slot] = dptr<float>(*s.params);
        L.g[slot] = dptr<const float>(*s.grads);
        L.m[slot] = dptr<float>(*s.m);
        L.v[slot] = dptr<float>(*s.v);
        L.n[slot] = s.params->numel();
        L.decay[slot] = s.decay ? c.decay : 1.0f;
      },
      [&](const AdamWLaunch& L, int blocks) {
        adamw_multi_kernel<<<blocks, kAdamWThreads, 0, stream_of(ec)>>>(
            L, c, cfg.grad_scale_from ? dptr<const float>(*cfg.grad_scale_from) : nullptr);
        check_launch("adamw_step_multi");
      });
}

namespace {

// total[0] = Σ sums[0 .. count) in order, from 0 (one thread: a host loop's order).
__global__ void ordered_total_kernel(const double* sums, int64_t count, double* total) {
  double t = 0.0;
  for (int64_t i = 0; i < count; ++i) t += sums[i];
  *total = t;
}

// Each tensor's sum of squares into a scratch buffer on ec's stream, in the
// order of xs; returns the buffer (empty when no tensor has an element) and
// sets `sums` to the first of those xs.size() values.
Tensor tensor_sums_on_device(const ExecContext& ec, std::span<const Tensor> xs,
                             const double*& sums) {
  const size_t count = xs.size();
  std::vector<int32_t> first(count + 1, 0);
  for (size_t i = 0; i < count; ++i) {
    const int64_t chunks = (xs[i].numel() + kSumChunk - 1) / kSumChunk;
    WEFT_CHECK(first[i] + chunks < INT32_MAX, "sum_of_squares_multi: {} elements are too many",
               xs[i].numel());
    first[i + 1] = static_cast<int32_t>(first[i] + chunks);
  }
  sums = nullptr;
  if (first.back() == 0) return {};
  // The chunk sums (in tensor and chunk order), then the tensors' sums.
  Tensor scratch =
      ec.empty({static_cast<int64_t>(first.back()) + static_cast<int64_t>(count)}, DType::f64);
  double* partial = dptr<double>(scratch);
  double* tensor_sums = partial + first.back();
  int64_t done = 0;
  for_each_launch<SumLaunch>(
      count, kSumChunk, [&](size_t i) { return xs[i].numel(); },
      [&](SumLaunch& L, int slot, size_t i) {
        L.x[slot] = dptr<const float>(xs[i]);
        L.n[slot] = xs[i].numel();
      },
      [&](const SumLaunch& L, int blocks) {
        sum_of_squares_multi_kernel<<<blocks, kSumThreads, 0, stream_of(ec)>>>(L, partial + done);
        check_launch("sum_of_squares_multi");
        done += blocks;
      });
  for (size_t base = 0; base < count; base += kSumsPerLaunch) {
    const int n = static_cast<int>(std::min<size_t>(kSumsPerLaunch, count - base));
    ChunkRanges r{};
    for (int j = 0; j <= n; ++j) r.first[j] = first[base + static_cast<size_t>(j)];
    tensor_sums_kernel<<<(n + kSumThreads - 1) / kSumThreads, kSumThreads, 0, stream_of(ec)>>>(
        partial, r, n, tensor_sums + base);
    check_launch("sum_of_squares_multi (tensor sums)");
  }
  sums = tensor_sums;
  return scratch;
}

}  // namespace

template <>
std::vector<double> sum_of_squares_multi<Backend::cuda>(const ExecContext& ec,
                                                        std::span<const Tensor> xs) {
  std::vector<double> sums(xs.size(), 0.0);
  const double* on_device = nullptr;
  const Tensor scratch = tensor_sums_on_device(ec, xs, on_device);
  if (!on_device) return sums;
  WEFT_CUDA_CHECK(cudaMemcpyAsync(sums.data(), on_device, sums.size() * sizeof(double),
                                  cudaMemcpyDeviceToHost, stream_of(ec)));
  weft::cuda::count_host_sync();
  WEFT_CUDA_CHECK(cudaStreamSynchronize(stream_of(ec)));
  return sums;
}

template <>
void sum_of_squares_total<Backend::cuda>(const ExecContext& ec, std::span<const Tensor> xs,
                                         Tensor& total) {
  const double* on_device = nullptr;
  const Tensor scratch = tensor_sums_on_device(ec, xs, on_device);
  if (!on_device) {
    WEFT_CUDA_CHECK(cudaMemsetAsync(total.raw(), 0, sizeof(double), stream_of(ec)));
    return;
  }
  ordered_total_kernel<<<1, 1, 0, stream_of(ec)>>>(on_device, static_cast<int64_t>(xs.size()),
                                                   dptr<double>(total));
  check_launch("sum_of_squares_total");
}

}  // namespace weft::kernels::impl
