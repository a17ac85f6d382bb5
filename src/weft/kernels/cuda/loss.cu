#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "weft/core/cuda.h"
#include "weft/kernels/cuda/common.cuh"
#include "weft/kernels/cuda/grid_stride.cuh"
#include "weft/kernels/impl/loss.h"
#include "weft/kernels/loss_vocab.h"

namespace weft::kernels::impl {

// The launch and element helpers of kernels/cuda/ (common.cuh and its kin).
using namespace cuda;

namespace {

// One block per row: a row of a 50k vocabulary is ~100 elements a thread.
constexpr int kRowThreads = 512;
// Threads of the one-thread-per-row kernels.
constexpr int kThreads = 256;

// Logits more than this below the row's maximum (or lse) are raised to that
// floor before exp, as the CPU kernel does (it keeps its exp in range; here
// it keeps both sides summing the same terms).
constexpr float kExpRange = 87.0f;

using detail::Vocab;
using detail::vocab_of;

// The elements of a small device tensor, after the work queued on ec's stream.
template <typename T>
std::vector<T> to_host(const ExecContext& ec, const Tensor& t) {
  std::vector<T> v(static_cast<size_t>(t.numel()));
  if (v.empty()) return v;
  WEFT_CUDA_CHECK(cudaMemcpyAsync(v.data(), t.raw(), v.size() * sizeof(T), cudaMemcpyDeviceToHost,
                                  stream_of(ec)));
  weft::cuda::count_host_sync();
  WEFT_CUDA_CHECK(cudaStreamSynchronize(stream_of(ec)));
  return v;
}

// The targets on the host (their shape checked in kernels/loss.cpp), every one checked, and how
// many rows are counted.
struct Targets {
  std::vector<int32_t> values;
  int64_t count = 0;
};

Targets check_targets(const ExecContext& ec, const Tensor& targets, const Vocab& v,
                      int32_t ignore_index, const char* op) {
  Targets t{to_host<int32_t>(ec, targets), 0};
  for (int64_t n = 0; n < v.rows; ++n) {
    const int32_t id = t.values[static_cast<size_t>(n)];
    if (id == ignore_index) continue;
    WEFT_CHECK(id >= 0 && id < v.valid_vocab,
               "{}: target {} of row {} is outside the vocabulary [0, {}) and is not the "
               "ignore_index {}; check the data's token ids against the model's vocab_size",
               op, id, n, v.valid_vocab, ignore_index);
    ++t.count;
  }
  return t;
}

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 20));
}

// ---- device code -------------------------------------------------------------

// Max over the block's row; NaN elements are skipped (fmaxf), as std::max
// skips them on the CPU, so that the NaN shows in the sum instead.
// Calls f(value) for the row's first `cols` elements, each thread its share:
// 16-byte Packs first where `packed` (every row on a 16-byte boundary), then
// element by element.
template <typename T, typename F>
__device__ __forceinline__ void for_row(const T* row, int64_t cols, bool packed, F&& f) {
  int64_t j0 = 0;
  if (packed) {
    constexpr int K = Pack<T>::kSize;
    const int64_t packs = cols / K;
    for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
      const Pack<T> a = load_pack(row, p);
#pragma unroll
      for (int k = 0; k < K; ++k) f(load_f(a.v, k));
    }
    j0 = packs * K;
  }
  for (int64_t j = j0 + threadIdx.x; j < cols; j += blockDim.x) f(load_f(row, j));
}

template <typename T>
__device__ float row_max(const T* row, int64_t cols, bool packed, float* scratch) {
  float m = -INFINITY;
  for_row(row, cols, packed, [&](float x) { m = fmaxf(m, x); });
  return block_max(m, scratch);
}

// A NaN logit makes the sum NaN, so that a diverged model shows a NaN loss
// (the floor alone would hide it).
template <typename T>
__device__ float row_sum_exp(const T* row, int64_t cols, bool packed, float max, float* scratch) {
  const float floor = max - kExpRange;
  float s = 0.0f, nans = 0.0f;
  for_row(row, cols, packed, [&](float x) {
    nans += x != x ? 1.0f : 0.0f;
    s += expf((x > floor ? x : floor) - max);
  });
  s = block_sum(s, scratch);
  nans = block_sum(nans, scratch);
  return nans > 0.0f ? __uint_as_float(0x7fc00000u) : s;
}

template <typename T>
__global__ void lse_kernel(const T* x, int64_t rows, int64_t cols, int64_t valid_cols, bool packed,
                           float* lse) {
  __shared__ float scratch[32];
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const T* row = x + n * cols;
    const float m = row_max(row, valid_cols, packed, scratch);
    const float s = row_sum_exp(row, valid_cols, packed, m, scratch);
    if (threadIdx.x == 0) lse[n] = m + logf(s);
  }
}

template <typename T>
__global__ void row_max_kernel(const T* x, int64_t rows, int64_t cols, int64_t valid_cols,
                               bool packed, float* out) {
  __shared__ float scratch[32];
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const float m = row_max(x + n * cols, valid_cols, packed, scratch);
    if (threadIdx.x == 0) out[n] = m;
  }
}

template <typename T>
__global__ void sum_exp_kernel(const T* x, int64_t rows, int64_t cols, int64_t valid_cols,
                               bool packed, const float* row_max_in, float* out) {
  __shared__ float scratch[32];
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const float s = row_sum_exp(x + n * cols, valid_cols, packed, row_max_in[n], scratch);
    if (threadIdx.x == 0) out[n] = s;
  }
}

// Whether every row of a (rows, cols) tensor at p starts on a 16-byte boundary.
template <typename T>
bool rows_packed(const void* p, int64_t cols) {
  return packs_fit({p}) && (cols * static_cast<int64_t>(sizeof(T))) % 16 == 0;
}

// out[n] = logits[n, targets[n] - start] when that column is a real one of
// this slice, else 0.
template <typename T>
__global__ void target_logit_kernel(const T* x, const int32_t* targets, int64_t rows, int64_t cols,
                                    int64_t start, int64_t valid_cols, int32_t ignore_index,
                                    float* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; n < rows;
       n += stride) {
    const int64_t local = static_cast<int64_t>(targets[n]) - start;
    const bool here = targets[n] != ignore_index && local >= 0 && local < valid_cols;
    out[n] = here ? load_f(x, n * cols + local) : 0.0f;
  }
}

__global__ void combine_kernel(const float* row_max_in, const float* sum_exp, int64_t rows,
                               float* lse) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; n < rows;
       n += stride) {
    lse[n] = row_max_in[n] + logf(sum_exp[n]);
  }
}

// loss = {mean of lse - target_logit over the scored rows (0 if none), their
// count}: one block, the sums in f64 and the counts exact, in a fixed tree
// (the same bits every run; the CPU adds in row order, which may differ in
// the last f64 bit before the rounding to f32).
constexpr int kStatThreads = 512;
__global__ void loss_stats_kernel(const float* lse, const float* target_logit,
                                  const int32_t* targets, int64_t rows, int32_t ignore_index,
                                  float* loss) {
  __shared__ double sums[kStatThreads];
  __shared__ long long counts[kStatThreads];
  double acc = 0.0;
  long long count = 0;
  for (int64_t n = threadIdx.x; n < rows; n += kStatThreads) {
    if (targets[n] == ignore_index) continue;
    acc += static_cast<double>(lse[n]) - static_cast<double>(target_logit[n]);
    ++count;
  }
  sums[threadIdx.x] = acc;
  counts[threadIdx.x] = count;
  __syncthreads();
  for (int half = kStatThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      sums[threadIdx.x] += sums[threadIdx.x + half];
      counts[threadIdx.x] += counts[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const long long c = counts[0];
    loss[0] = c > 0 ? static_cast<float>(sums[0] / static_cast<double>(c)) : 0.0f;
    loss[1] = static_cast<float>(c);
  }
}

void launch_loss_stats(const ExecContext& ec, const Tensor& lse, const Tensor& target_logit,
                       const Tensor& targets, int64_t rows, int32_t ignore_index, Tensor& loss) {
  loss_stats_kernel<<<1, kStatThreads, 0, stream_of(ec)>>>(
      dptr<const float>(lse), dptr<const float>(target_logit), dptr<const int32_t>(targets), rows,
      ignore_index, dptr<float>(loss));
  check_launch("cross_entropy loss_stats_kernel");
}

// dx may be x itself: every element is read and then written by the same
// thread, so no pointer is __restrict__.
template <typename T, typename D>
__global__ void backward_kernel(const T* x, const int32_t* targets, const float* lse, int64_t rows,
                                int64_t cols, int64_t start, int64_t valid_cols,
                                int32_t ignore_index, float scale, const float* counted,
                                float dloss, bool packed, D* dx) {
  if (counted) {
    // The forward's count of scored rows (CrossEntropyOptions::counted), as
    // the host computes the scale from it.
    const double count = counted[1];
    scale = count > 0.0 ? static_cast<float>(static_cast<double>(dloss) / count) : 0.0f;
  }
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const T* row = x + n * cols;
    D* drow = dx + n * cols;
    if (targets[n] == ignore_index) {
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) store_f(drow, j, 0.0f);
      continue;
    }
    // Under vocab parallelism the target's column may belong to another rank
    // (then it matches no j).
    const int64_t target = static_cast<int64_t>(targets[n]) - start;
    const float l = lse[n], floor = l - kExpRange;
    auto grad = [&](int64_t j, float z) {
      if (j >= valid_cols) return 0.0f;
      const float p = expf((z > floor ? z : floor) - l);
      return (j == target ? p - 1.0f : p) * scale;
    };
    int64_t j0 = 0;
    if constexpr (std::is_same_v<T, D>) {
      // Packs in and out where the rows allow (the same arithmetic).
      if (packed) {
        constexpr int K = Pack<T>::kSize;
        const int64_t packs = cols / K;
        for (int64_t p = threadIdx.x; p < packs; p += blockDim.x) {
          const Pack<T> a = load_pack(row, p);
          Pack<D> out;
#pragma unroll
          for (int k = 0; k < K; ++k) store_f(out.v, k, grad(p * K + k, load_f(a.v, k)));
          store_pack(drow, p, out);
        }
        j0 = packs * K;
      }
    }
    for (int64_t j = j0 + threadIdx.x; j < cols; j += blockDim.x) {
      store_f(drow, j, grad(j, load_f(row, j)));
    }
  }
}

// Fills lse (N) on the device from logits whose first valid_cols columns are real.
void launch_lse(const ExecContext& ec, const Tensor& logits, const Vocab& v, Tensor& lse) {
  dispatch_float(logits.dtype(), "cross_entropy_forward", [&]<typename T>() {
    lse_kernel<T><<<row_blocks(v.rows), kRowThreads, 0, stream_of(ec)>>>(
        dptr<const T>(logits), v.rows, v.cols, v.valid_cols, rows_packed<T>(logits.raw(), v.cols),
        dptr<float>(lse));
    check_launch("cross_entropy lse_kernel");
  });
}

void launch_target_logit(const ExecContext& ec, const Tensor& logits, const Tensor& targets,
                         const Vocab& v, int32_t ignore_index, Tensor& out) {
  dispatch_float(logits.dtype(), "cross_entropy_target_logit", [&]<typename T>() {
    target_logit_kernel<T><<<blocks_for(v.rows, kThreads), kThreads, 0, stream_of(ec)>>>(
        dptr<const T>(logits), dptr<const int32_t>(targets), v.rows, v.cols, v.start, v.valid_cols,
        ignore_index, dptr<float>(out));
    check_launch("cross_entropy target_logit_kernel");
  });
}

}  // namespace

template <>
int64_t count_targets<Backend::cuda>(const ExecContext& ec, const Tensor& targets,
                                     int32_t ignore_index) {
  const std::vector<int32_t> t = to_host<int32_t>(ec, targets);
  return std::count_if(t.begin(), t.end(), [&](int32_t id) { return id != ignore_index; });
}

template <>
void cross_entropy_forward<Backend::cuda>(const ExecContext& ec, const Tensor& logits,
                                          const Tensor& targets, Tensor& lse, Tensor& loss,
                                          const CrossEntropyOptions& opt) {
  constexpr const char* op = "cross_entropy_forward";
  const Vocab v = vocab_of(logits, opt);
  if (!opt.targets_checked) check_targets(ec, targets, v, opt.ignore_index, op);
  if (v.rows > 0) launch_lse(ec, logits, v, lse);
  Tensor target_logit = ec.empty({v.rows}, DType::f32);
  if (v.rows > 0) launch_target_logit(ec, logits, targets, v, opt.ignore_index, target_logit);
  launch_loss_stats(ec, lse, target_logit, targets, v.rows, opt.ignore_index, loss);
}

template <>
void cross_entropy_backward<Backend::cuda>(const ExecContext& ec, const Tensor& logits,
                                           const Tensor& targets, const Tensor& lse, float dloss,
                                           Tensor& dlogits, const CrossEntropyOptions& opt) {
  constexpr const char* op = "cross_entropy_backward";
  const Vocab v = vocab_of(logits, opt);
  // The scored rows: the forward's count on the device, or counted here
  // (the targets are read back and checked unless the caller checked them).
  int64_t count = 0;
  if (!opt.counted || !opt.targets_checked) {
    count = check_targets(ec, targets, v, opt.ignore_index, op).count;
  }
  if (v.rows == 0 || v.cols == 0) return;
  // count is 0 only when every row is ignored: then every row is zeroed.
  const float scale =
      count > 0 ? static_cast<float>(static_cast<double>(dloss) / static_cast<double>(count))
                : 0.0f;
  const float* counted = opt.counted ? dptr<const float>(*opt.counted) : nullptr;
  dispatch_float(logits.dtype(), op, [&]<typename T>() {
    dispatch_float(dlogits.dtype(), op, [&]<typename D>() {
      backward_kernel<T, D><<<row_blocks(v.rows), kRowThreads, 0, stream_of(ec)>>>(
          dptr<const T>(logits), dptr<const int32_t>(targets), dptr<const float>(lse), v.rows,
          v.cols, v.start, v.valid_cols, opt.ignore_index, scale, counted, dloss,
          rows_packed<T>(logits.raw(), v.cols) && rows_packed<D>(dlogits.raw(), v.cols),
          dptr<D>(dlogits));
      check_launch("cross_entropy backward_kernel");
    });
  });
}

template <>
void cross_entropy_row_max<Backend::cuda>(const ExecContext& ec, const Tensor& logits,
                                          Tensor& row_max_out, const CrossEntropyOptions& opt) {
  constexpr const char* op = "cross_entropy_row_max";
  const Vocab v = vocab_of(logits, opt);
  if (v.rows == 0) return;
  dispatch_float(logits.dtype(), op, [&]<typename T>() {
    row_max_kernel<T><<<row_blocks(v.rows), kRowThreads, 0, stream_of(ec)>>>(
        dptr<const T>(logits), v.rows, v.cols, v.valid_cols, rows_packed<T>(logits.raw(), v.cols),
        dptr<float>(row_max_out));
    check_launch("cross_entropy row_max_kernel");
  });
}

template <>
void cross_entropy_target_logit<Backend::cuda>(const ExecContext& ec, const Tensor& logits,
                                               const Tensor& targets, Tensor& target_logit,
                                               const CrossEntropyOptions& opt) {
  constexpr const char* op = "cross_entropy_target_logit";
  const Vocab v = vocab_of(logits, opt);
  if (!opt.targets_checked) check_targets(ec, targets, v, opt.ignore_index, op);
  if (v.rows == 0) return;
  launch_target_logit(ec, logits, targets, v, opt.ignore_index, target_logit);
}

template <>
void cross_entropy_sum_exp<Backend::cuda>(const ExecContext& ec, const Tensor& logits,
                                          const Tensor& row_max_in, Tensor& sum_exp,
                                          const CrossEntropyOptions& opt) {
  constexpr const char* op = "cross_entropy_sum_exp";
  const Vocab v = vocab_of(logits, opt);
  if (v.rows == 0) return;
  dispatch_float(logits.dtype(), op, [&]<typename T>() {
    sum_exp_kernel<T><<<row_blocks(v.rows), kRowThreads, 0, stream_of(ec)>>>(
        dptr<const T>(logits), v.rows, v.cols, v.valid_cols, rows_packed<T>(logits.raw(), v.cols),
        dptr<const float>(row_max_in), dptr<float>(sum_exp));
    check_launch("cross_entropy sum_exp_kernel");
  });
}

template <>
void cross_entropy_combine<Backend::cuda>(const ExecContext& ec, const Tensor& row_max_in,
                                          const Tensor& sum_exp, const Tensor& target_logit,
                                          const Tensor& targets, Tensor& lse, Tensor& loss,
                                          int32_t ignore_index) {
  const int64_t rows = row_max_in.size(0);
  if (rows > 0) {
    combine_kernel<<<blocks_for(rows, kThreads), kThreads, 0, stream_of(ec)>>>(
        dptr<const float>(row_max_in), dptr<const float>(sum_exp), rows, dptr<float>(lse));
    check_launch("cross_entropy combine_kernel");
  }
  launch_loss_stats(ec, lse, target_logit, targets, rows, ignore_index, loss);
}

}  // namespace weft::kernels::impl
