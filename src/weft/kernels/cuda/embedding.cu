#include <algorithm>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>
#include <utility>
#include <vector>

#include "weft/core/cuda.h"
#include "weft/kernels/cuda/common.cuh"
#include "weft/kernels/cuda/grid_stride.cuh"
#include "weft/kernels/impl/embedding.h"

namespace weft::kernels::impl {

// The launch and element helpers of kernels/cuda/ (common.cuh and its kin).
using namespace cuda;

namespace {

struct Shapes {
  int64_t table_rows, channels, batch, seq;
};
// Checked in kernels/embedding.cpp before the dispatch.
Shapes shapes_of(const Tensor& table, const Tensor& act) {
  return {table.size(0), table.size(1), act.size(0), act.size(1)};
}

// The tokens (B,T) (their shape and the options checked in kernels/embedding.cpp),
// copied to the host and checked against the vocabulary with the CPU kernel's message.
std::vector<int32_t> checked_tokens(const ExecContext& ec, const Tensor& tokens, int64_t seq,
                                    int64_t table_rows, const EmbeddingOptions& opt,
                                    const char* op) {
  WEFT_CHECK(tokens.numel() < (int64_t{1} << 31),
             "{}: {} tokens exceed the 2^31 this kernel handles", op, tokens.numel());
  const int64_t valid_vocab = opt.valid_vocab > 0 ? opt.valid_vocab : opt.vocab_start + table_rows;
  std::vector<int32_t> tok(static_cast<size_t>(tokens.numel()));
  if (tok.empty()) return tok;
  WEFT_CUDA_CHECK(cudaMemcpyAsync(tok.data(), tokens.raw(), tok.size() * sizeof(int32_t),
                                  cudaMemcpyDeviceToHost, stream_of(ec)));
  weft::cuda::count_host_sync();
  WEFT_CUDA_CHECK(cudaStreamSynchronize(stream_of(ec)));
  for (size_t i = 0; i < tok.size(); ++i) {
    WEFT_CHECK(tok[i] >= 0 && tok[i] < valid_vocab,
               "{}: token id {} at (batch {}, position {}) is outside the vocabulary [0, {}); "
               "check the data's token ids against the model's vocab_size",
               op, tok[i], static_cast<int64_t>(i) / seq, static_cast<int64_t>(i) % seq,
               valid_vocab);
  }
  return tok;
}

// tokens (rows), wte (vocab, C) -> out (rows, C). One block per token row:
// out[n] = wte[tokens[n] - vocab_start], or zeros
// for a token outside this table's slice.
template <typename TW, typename TO>
__global__ void embedding_forward_kernel(const int32_t* tokens, const TW* wte, TO* out,
                                         int64_t rows, int64_t vocab, int64_t channels,
                                         int64_t vocab_start) {
  for (int64_t n = blockIdx.x; n < rows; n += gridDim.x) {
    const int64_t local = tokens[n] - vocab_start;
    TO* dst = out + n * channels;
    if (local < 0 || local >= vocab) {
      for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) store_f(dst, c, 0.0f);
      continue;
    }
    const TW* src = wte + local * channels;
    for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) store_f(dst, c, load_f(src, c));
  }
}

// dout (rows, C) -> dwte (vocab, C) +=. One block per distinct token of the slice: its dwte row
// adds the dout rows of its occurrences in token order (rows[starts[k] .. starts[k+1])), the CPU's
// order, so the sums are the CPU's bit for bit. The groups are `groups` many, or, grouped on
// the device, *group_count many; a group whose token is table_rows or more (the tokens of other
// slices, which the device grouping sorts last) is skipped.
template <typename T>
__global__ void embedding_backward_kernel(const T* dout, const int32_t* rows, const int32_t* starts,
                                          const int32_t* locals, int64_t groups,
                                          const int32_t* group_count, int64_t table_rows,
                                          int64_t channels, float* dwte) {
  if (group_count) groups = *group_count;
  for (int64_t k = blockIdx.x; k < groups; k += gridDim.x) {
    if (locals[k] >= table_rows) continue;
    float* g = dwte + static_cast<int64_t>(locals[k]) * channels;
    const int32_t begin = starts[k], end = starts[k + 1];
    for (int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
      float acc = g[c];
      for (int32_t p = begin; p < end; ++p) acc += load_f(dout, rows[p] * channels + c);
      g[c] = acc;
    }
  }
}

// keys[n] = the slice row of token n, or table_rows for a token of another
// slice; rows[n] = n (the values the stable sort carries).
__global__ void slice_keys_kernel(const int32_t* tokens, int64_t n, int64_t vocab_start,
                                  int64_t table_rows, int32_t* keys, int32_t* rows) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) {
    const int64_t local = static_cast<int64_t>(tokens[i]) - vocab_start;
    keys[i] = static_cast<int32_t>(local >= 0 && local < table_rows ? local : table_rows);
    rows[i] = static_cast<int32_t>(i);
  }
}

// table (seq, C) -> out (rows, C) += table[position of the row]
template <typename T>
__global__ void position_forward_kernel(const float* table, T* out, int64_t rows, int64_t channels,
                                        int64_t batch, int64_t seq, bool sequence_major) {
  for (int64_t i = grid_start(); i < rows * channels; i += grid_stride()) {
    const int64_t n = i / channels, c = i % channels;
    const int64_t t = sequence_major ? n / batch : n % seq;
    store_f(out, i, load_f(out, i) + table[t * channels + c]);
  }
}

// dout (rows, C) -> grad (seq, C) +=. One thread per (position, column),
// summing the batch in order b = 0, 1, ...
template <typename T>
__global__ void position_backward_kernel(const T* dout, float* grad, int64_t channels,
                                         int64_t batch, int64_t seq, bool sequence_major) {
  for (int64_t i = grid_start(); i < seq * channels; i += grid_stride()) {
    const int64_t t = i / channels, c = i % channels;
    float acc = grad[i];
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t row = sequence_major ? t * batch + b : b * seq + t;
      acc += load_f(dout, row * channels + c);
    }
    grad[i] = acc;
  }
}

// embedding_backward with the rows grouped by token on the device (the ids
// were checked by the caller): a stable radix sort of (slice row, row) pairs,
// the runs of equal tokens and their starts, then the kernel above; nothing
// is read back, so the step waits for nothing here.
void embedding_backward_grouped_on_device(const ExecContext& ec, const Tensor& dout,
                                          const Tensor& tokens, Tensor& dwte, const Shapes& s,
                                          const EmbeddingOptions& opt) {
  const int64_t n64 = tokens.numel();
  WEFT_CHECK(n64 < (int64_t{1} << 31) - 1 && s.table_rows < (int64_t{1} << 30),
             "embedding_backward: {} tokens or {} table rows exceed what this kernel handles", n64,
             s.table_rows);
  if (n64 == 0 || s.channels == 0) return;
  const int n = static_cast<int>(n64);
  int end_bit = 1;
  while ((int64_t{1} << end_bit) <= s.table_rows) ++end_bit;  // keys run to table_rows
  cudaStream_t stream = stream_of(ec);
  // i32 scratch: keys and rows in and out, the runs' tokens, counts and starts, the run count.
  Tensor ints = ec.empty({7 * n64 + 3}, DType::i32);
  int32_t* keys_in = dptr<int32_t>(ints);
  int32_t* keys_out = keys_in + n;
  int32_t* rows_in = keys_out + n;
  int32_t* rows_out = rows_in + n;
  int32_t* uniques = rows_out + n;
  int32_t* counts = uniques + n;     // n + 1
  int32_t* starts = counts + n + 1;  // n + 1
  int32_t* runs = starts + n + 1;
  size_t sort_bytes = 0, rle_bytes = 0, scan_bytes = 0;
  WEFT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, keys_in, keys_out, rows_in,
                                                  rows_out, n, 0, end_bit, stream));
  WEFT_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, rle_bytes, keys_out, uniques, counts,
                                                     runs, n, stream));
  WEFT_CUDA_CHECK(
      cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, counts, starts, n + 1, stream));
  const size_t temp_bytes = std::max({sort_bytes, rle_bytes, scan_bytes, size_t{1}});
  Tensor temp = ec.empty({static_cast<int64_t>(temp_bytes)}, DType::u8);
  void* t = temp.raw();
  slice_keys_kernel<<<blocks_for(n64, kThreads), kThreads, 0, stream>>>(
      dptr<const int32_t>(tokens), n64, opt.vocab_start, s.table_rows, keys_in, rows_in);
  check_launch("embedding_backward slice_keys");
  size_t bytes = temp_bytes;
  WEFT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(t, bytes, keys_in, keys_out, rows_in, rows_out, n,
                                                  0, end_bit, stream));
  // Counts past the runs stay 0, so the scan's entry at the run count is n.
  WEFT_CUDA_CHECK(cudaMemsetAsync(counts, 0, (n64 + 1) * sizeof(int32_t), stream));
  bytes = temp_bytes;
  WEFT_CUDA_CHECK(
      cub::DeviceRunLengthEncode::Encode(t, bytes, keys_out, uniques, counts, runs, n, stream));
  bytes = temp_bytes;
  WEFT_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(t, bytes, counts, starts, n + 1, stream));
  dispatch_float(dout.dtype(), "embedding_backward: dout", [&]<typename T>() {
    embedding_backward_kernel<T><<<row_blocks(n64), kThreads, 0, stream>>>(
        dptr<const T>(dout), rows_out, starts, uniques, n64, runs, s.table_rows, s.channels,
        dptr<float>(dwte));
    check_launch("embedding_backward");
  });
}

}  // namespace

template <>
void embedding_forward<Backend::cuda>(const ExecContext& ec, const Tensor& tokens,
                                      const Tensor& wte, Tensor& out, const EmbeddingOptions& opt) {
  constexpr const char* op = "embedding_forward";
  const Shapes s = shapes_of(wte, out);
  if (!opt.ids_checked) checked_tokens(ec, tokens, s.seq, s.table_rows, opt, op);
  const int64_t rows = s.batch * s.seq;
  if (rows == 0 || s.channels == 0) return;
  dispatch_float(wte.dtype(), "embedding_forward: wte", [&]<typename TW>() {
    dispatch_float(out.dtype(), "embedding_forward: out", [&]<typename TO>() {
      embedding_forward_kernel<TW, TO><<<row_blocks(rows), kThreads, 0, stream_of(ec)>>>(
          dptr<const int32_t>(tokens), dptr<const TW>(wte), dptr<TO>(out), rows, s.table_rows,
          s.channels, opt.vocab_start);
      check_launch("embedding_forward");
    });
  });
}

template <>
void embedding_backward<Backend::cuda>(const ExecContext& ec, const Tensor& dout,
                                       const Tensor& tokens, Tensor& dwte,
                                       const EmbeddingOptions& opt) {
  constexpr const char* op = "embedding_backward";
  const Shapes s = shapes_of(dwte, dout);
  if (opt.ids_checked) {
    embedding_backward_grouped_on_device(ec, dout, tokens, dwte, s, opt);
    return;
  }
  const std::vector<int32_t> tok = checked_tokens(ec, tokens, s.seq, s.table_rows, opt, op);
  if (tok.empty() || s.channels == 0) return;
  // The rows of each token of this slice, in row order (a stable sort by
  // token), packed as [rows | group starts | group tokens] for one copy.
  std::vector<std::pair<int32_t, int32_t>> by_token;  // (local token, row)
  by_token.reserve(tok.size());
  for (size_t n = 0; n < tok.size(); ++n) {
    const int64_t local = tok[n] - opt.vocab_start;
    if (local >= 0 && local < s.table_rows) {
      by_token.emplace_back(static_cast<int32_t>(local), static_cast<int32_t>(n));
    }
  }
  if (by_token.empty()) return;
  std::stable_sort(by_token.begin(), by_token.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<int32_t> starts, locals;
  for (size_t p = 0; p < by_token.size(); ++p) {
    if (p == 0 || by_token[p].first != by_token[p - 1].first) {
      starts.push_back(static_cast<int32_t>(p));
      locals.push_back(by_token[p].first);
    }
  }
  starts.push_back(static_cast<int32_t>(by_token.size()));
  const int64_t groups = static_cast<int64_t>(locals.size());
  std::vector<int32_t> packed;
  packed.reserve(by_token.size() + starts.size() + locals.size());
  for (const auto& e : by_token) packed.push_back(e.second);
  packed.insert(packed.end(), starts.begin(), starts.end());
  packed.insert(packed.end(), locals.begin(), locals.end());
  Tensor index = ec.empty({static_cast<int64_t>(packed.size())}, DType::i32);
  int32_t* dev = dptr<int32_t>(index);
  // From pageable memory the copy has read `packed` when it returns.
  WEFT_CUDA_CHECK(cudaMemcpyAsync(dev, packed.data(), packed.size() * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, stream_of(ec)));
  const int32_t* rows = dev;
  const int32_t* group_starts = rows + by_token.size();
  const int32_t* group_locals = group_starts + starts.size();
  dispatch_float(dout.dtype(), "embedding_backward: dout", [&]<typename T>() {
    embedding_backward_kernel<T><<<row_blocks(groups), kThreads, 0, stream_of(ec)>>>(
        dptr<const T>(dout), rows, group_starts, group_locals, groups, nullptr, s.table_rows,
        s.channels, dptr<float>(dwte));
    check_launch("embedding_backward");
  });
}

template <>
void position_embedding_forward<Backend::cuda>(const ExecContext& ec, const Tensor& wpe,
                                               Tensor& out, int64_t pos_offset,
                                               bool sequence_major) {
  const Shapes s = shapes_of(wpe, out);
  const int64_t batch = sequence_major ? s.seq : s.batch;
  const int64_t seq = sequence_major ? s.batch : s.seq;
  const int64_t rows = batch * seq;
  if (rows * s.channels == 0) return;
  const float* table = dptr<const float>(wpe) + pos_offset * s.channels;
  dispatch_float(out.dtype(), "position_embedding_forward: out", [&]<typename T>() {
    position_forward_kernel<T>
        <<<blocks_for(rows * s.channels, kThreads), kThreads, 0, stream_of(ec)>>>(
            table, dptr<T>(out), rows, s.channels, batch, seq, sequence_major);
    check_launch("position_embedding_forward");
  });
}

template <>
void position_embedding_backward<Backend::cuda>(const ExecContext& ec, const Tensor& dout,
                                                Tensor& dwpe, int64_t pos_offset,
                                                bool sequence_major) {
  const Shapes s = shapes_of(dwpe, dout);
  const int64_t batch = sequence_major ? s.seq : s.batch;
  const int64_t seq = sequence_major ? s.batch : s.seq;
  if (seq * s.channels == 0) return;
  float* grad = dptr<float>(dwpe) + pos_offset * s.channels;
  dispatch_float(dout.dtype(), "position_embedding_backward: dout", [&]<typename T>() {
    position_backward_kernel<T>
        <<<blocks_for(seq * s.channels, kThreads), kThreads, 0, stream_of(ec)>>>(
            dptr<const T>(dout), grad, s.channels, batch, seq, sequence_major);
    check_launch("position_embedding_backward");
  });
}

}  // namespace weft::kernels::impl
