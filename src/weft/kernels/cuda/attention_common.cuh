// What the CUDA attention kernels (attention_forward.cu, attention_backward.cu)
// share: the blocking, the launch parameters, the element and tile helpers of
// the CUDA-core kernels and the wmma tile products of the tensor-core ones, and
// the launch dispatch over head widths. Internal to kernels/cuda/; included
// only by those two .cu files.
#pragma once

#include <mma.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "weft/kernels/attention.h"
#include "weft/kernels/attention_dims.h"
#include "weft/kernels/cuda/common.cuh"
#include "weft/kernels/cuda/philox.cuh"

namespace weft::kernels::cuda {

// Query rows (forward, dQ) or keys (dK/dV) per thread block, and keys
// (queries) per shared-memory tile. A group of G consecutive threads of a warp
// owns one row, each thread DL of its head dimensions (d = g, g + G, ...), so
// that the G threads read consecutive words of a tile row while the other
// groups of the warp read the same row (a broadcast).
constexpr int kRows = 64;
constexpr int kTile = 64;
constexpr int64_t kMaxHeadDim = 128;

using Dims = detail::AttentionDims;

// The dimensions of a qkv that kernels/attention.cpp accepted, within what
// these kernels support.
inline Dims check_qkv(const Tensor& qkv, const AttentionConfig& cfg) {
  const Dims d = detail::attention_dims(qkv, cfg);
  WEFT_CHECK(d.D <= kMaxHeadDim, "CUDA attention supports head dimensions up to {}, got {}",
             kMaxHeadDim, d.D);
  // Heads of batch entries (query heads; key/value heads for dK and dV) are
  // the grid's y dimension.
  WEFT_CHECK(d.B * d.H <= 65535,
             "CUDA attention supports up to 65535 batch entries × heads, got {}", d.B * d.H);
  return d;
}

// What every kernel reads: the layout, the softmax scale and the dropout stream.
struct Params {
  // C = H·D: the width of q and of the output; W = (H + 2·Hkv)·D: of qkv.
  int64_t B, T, H, C, Hkv, W;
  int D;
  bool sequence_major, causal;
  float inv_sqrt_d, dropout, keep_scale;
  uint64_t seed, offset;

  // The row of token (b, t) in the activations.
  __device__ int64_t row(int64_t b, int64_t t) const {
    return sequence_major ? t * B + b : b * T + t;
  }
  __device__ bool visible(int64_t t, int64_t j) const { return !causal || j <= t; }
  // The first qkv columns of the key and value heads that query head h reads
  // (h mod Hkv: query heads h, h + Hkv, ... share one).
  __device__ int64_t k_column(int64_t h) const { return C + (h % Hkv) * D; }
  __device__ int64_t v_column(int64_t h) const { return C + (Hkv + h % Hkv) * D; }
  // Whether dropout keeps the weight of key j in row t of head bh: stream
  // number offset + (bh·T + t)·T + j, as the CPU kernels draw it.
  __device__ bool kept(int64_t bh, int64_t t, int64_t j) const {
    return uniform_at(seed, offset, static_cast<uint64_t>((bh * T + t) * T + j)) >= dropout;
  }
};

inline Params make_params(const Dims& d, const AttentionConfig& cfg) {
  Params p{};
  p.B = d.B;
  p.T = d.T;
  p.H = d.H;
  p.C = d.C;
  p.Hkv = d.Hkv;
  p.W = d.width();
  p.D = static_cast<int>(d.D);
  p.sequence_major = d.sequence_major;
  p.causal = cfg.causal;
  p.inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(d.D));
  p.dropout = cfg.dropout;
  p.keep_scale = 1.0f / (1.0f - cfg.dropout);
  p.seed = cfg.seed;
  p.offset = cfg.offset;
  return p;
}

// v as the operand a bf16 product would see (the CPU kernels multiply the
// weights and dS in qkv's dtype); unchanged in f32.
template <typename T>
__device__ __forceinline__ float operand(float v) {
  if constexpr (std::is_same_v<T, uint16_t>) {
    return __uint_as_float(static_cast<uint32_t>(f32_to_bf16_bits(v)) << 16);
  } else {
    return v;
  }
}

// The sum over a row's G threads (aligned within the warp); every one of
// them gets the same bits (the butterfly adds the same pairs everywhere).
template <int G>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Lane of the calling thread's group leader in its warp.
template <int G>
__device__ __forceinline__ int group_leader() {
  return static_cast<int>(threadIdx.x % 32) & ~(G - 1);
}

// Rows first .. first+count-1 of the head columns col0 .. col0+D-1 of a
// (tokens, width) activation of batch entry b into an f32 (kTile, D) tile;
// rows from count on are zero.
template <typename T>
__device__ void load_tile(float* tile, const T* src, int64_t width, int64_t col0, const Params& p,
                          int64_t b, int64_t first, int count) {
  for (int i = static_cast<int>(threadIdx.x); i < kTile * p.D; i += static_cast<int>(blockDim.x)) {
    const int r = i / p.D, d = i % p.D;
    tile[i] = r < count ? load_f(src, p.row(b, first + r) * width + col0 + d) : 0.0f;
  }
}

// ---------------------------------------------------------------------------
// The tensor-core path: bf16 qkv with heads of 16, 32, 64 or 128. The same
// algorithm and blocks as above, but the products run on wmma bf16 16x16x16
// fragments with f32 accumulation. A block of kTcWarps warps owns kRows query
// rows (forward, dQ) or keys (dK/dV), 16 per warp. A warp writes its f32
// scores (and dP) of a 64-wide tile to shared memory, turns them into the bf16
// operands row by row with its 32 lanes (two columns each: the softmax, the
// dropout decisions and the roundings of the kernels above), and multiplies
// those into f32 accumulators kept in shared memory: the wmma accumulator's
// element-to-lane mapping is unspecified, so rows cannot be rescaled in it.

namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;

constexpr int kTcWarps = kRows / 16;
constexpr int kTcThreads = 32 * kTcWarps;
// Row strides in shared memory, padded against bank conflicts: bf16 tiles
// D + 8 elements, f32 accumulators D + 4, f32 scores kTile + 4 (the bf16
// operands made from them are written over each row's first half, so their
// row stride is 2·kScoreLd elements).
// wmma needs strides of multiples of 16 bytes and fragment pointers 32-byte
// aligned: every fragment here starts at a multiple of 16 rows and columns.
constexpr int kScoreLd = kTile + 4;

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// Shared memory of the tensor-core kernels, in bytes (every size a multiple
// of 128, so each region stays aligned).
template <int D>
struct TcSizes {
  static constexpr int ld = D + 8;                             // bf16 tile row stride
  static constexpr int acc_ld = D + 4;                         // f32 accumulator row stride
  static constexpr int tile = kTile * ld * 2;                  // (kTile, D) bf16
  static constexpr int scores = kTcWarps * 16 * kScoreLd * 4;  // (kRows, kTile) f32
  static constexpr int acc = kRows * acc_ld * 4;               // (kRows, D) f32
  static constexpr int rows = kTile * 4;                       // (kTile) f32
  static constexpr int forward = 3 * tile + scores + acc;
  static constexpr int dkdv = 4 * tile + 2 * scores + 2 * acc + 2 * rows;
  static constexpr int dq = 4 * tile + 2 * scores + acc + 2 * rows;
};

// Rows first .. first+count-1 of the head columns col0 .. col0+D-1 of a bf16
// (tokens, width) activation of batch entry b into a (kTile, D + 8) shared
// tile, 16 bytes per load; rows from count on are zero (so that they add
// nothing to a product, whatever shared memory held before).
template <int D>
__device__ void tc_load_tile(bf16* tile, const uint16_t* src, int64_t width, int64_t col0,
                             const Params& p, int64_t b, int64_t first, int count) {
  constexpr int kChunks = D / 8;
  for (int i = static_cast<int>(threadIdx.x); i < kTile * kChunks; i += kTcThreads) {
    const int r = i / kChunks, c = i % kChunks;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (r < count) {
      v = *reinterpret_cast<const uint4*>(src + p.row(b, first + r) * width + col0 + c * 8);
    }
    *reinterpret_cast<uint4*>(tile + r * TcSizes<D>::ld + c * 8) = v;
  }
}

// out (16, kTile) f32, row stride kScoreLd = a (16, D) · bᵀ with b (kTile, D);
// a and b row-major bf16 of row stride D + 8 (b read as a column-major Bᵀ).
template <int D>
__device__ void tc_product_nt(float* out, const bf16* a, const bf16* b) {
  constexpr int ld = TcSizes<D>::ld;
  FragA fa[D / 16];
#pragma unroll
  for (int k = 0; k < D / 16; ++k) wmma::load_matrix_sync(fa[k], a + k * 16, ld);
#pragma unroll
  for (int n = 0; n < kTile / 16; ++n) {
    FragC c;
    wmma::fill_fragment(c, 0.0f);
#pragma unroll
    for (int k = 0; k < D / 16; ++k) {
      FragBCol fb;
      wmma::load_matrix_sync(fb, b + n * 16 * ld + k * 16, ld);
      wmma::mma_sync(c, fa[k], fb, c);
    }
    wmma::store_matrix_sync(out + n * 16, c, kScoreLd, wmma::mem_row_major);
  }
}

// acc (16, D) f32 of row stride D + 4 += a (16, kTile) · b (kTile, D): a the
// bf16 operands written over a warp's scores (row stride 2·kScoreLd), b a
// row-major bf16 tile of row stride D + 8.
template <int D>
__device__ void tc_accumulate(float* acc, const bf16* a, const bf16* b) {
  constexpr int ld = TcSizes<D>::ld, acc_ld = TcSizes<D>::acc_ld;
  FragA fa[kTile / 16];
#pragma unroll
  for (int k = 0; k < kTile / 16; ++k) wmma::load_matrix_sync(fa[k], a + k * 16, 2 * kScoreLd);
#pragma unroll
  for (int n = 0; n < D / 16; ++n) {
    FragC c;
    wmma::load_matrix_sync(c, acc + n * 16, acc_ld, wmma::mem_row_major);
#pragma unroll
    for (int k = 0; k < kTile / 16; ++k) {
      FragBRow fb;
      wmma::load_matrix_sync(fb, b + k * 16 * ld + n * 16, ld);
      wmma::mma_sync(c, fa[k], fb, c);
    }
    wmma::store_matrix_sync(acc + n * 16, c, acc_ld, wmma::mem_row_major);
  }
}

// Columns 2·lane, 2·lane + 1 of row r of a warp's f32 scores.
__device__ __forceinline__ float2 tc_pair(const float* scores, int r, int lane) {
  return *reinterpret_cast<const float2*>(scores + r * kScoreLd + 2 * lane);
}
// The same two columns of row r of the bf16 operands written over the scores
// (call only once every lane has read row r: the two overlap).
__device__ __forceinline__ void tc_put_pair(float* scores, int r, int lane, float lo, float hi) {
  reinterpret_cast<uint32_t*>(scores)[r * kScoreLd + lane] =
      static_cast<uint32_t>(f32_to_bf16_bits(lo)) |
      (static_cast<uint32_t>(f32_to_bf16_bits(hi)) << 16);
}

// Zeroes a warp's (16, D) accumulator.
template <int D>
__device__ void tc_zero(float* acc, int lane) {
  for (int i = lane; i < 16 * TcSizes<D>::acc_ld; i += 32) acc[i] = 0.0f;
}

// Calls fn.template operator()<G, DL>() with G = 8 threads per row and the
// fewest registers per thread (DL) that hold a head of D dimensions. (8
// threads per row ran the GPT-2 shape about 10% faster on an H100 than 4 with
// twice the registers: twice the warps per query block hide more latency.)
template <typename Fn>
void dispatch_head_dim(int64_t D, Fn&& fn) {
  if (D <= 32) {
    fn.template operator()<8, 4>();
  } else if (D <= 64) {
    fn.template operator()<8, 8>();
  } else {
    fn.template operator()<8, 16>();
  }
}

// Launches kernel on (blocks, B·H) blocks of `threads` threads with `bytes`
// of dynamic shared memory (above the default 48 KiB for large heads; the
// attribute is set on every launch because it belongs to the current device).
template <typename Kernel, typename... Args>
void launch(const ExecContext& ec, const char* name, Kernel kernel, int64_t blocks, int64_t heads,
            int threads, int64_t bytes, Args... args) {
  WEFT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)));
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(heads));
  kernel<<<grid, threads, static_cast<size_t>(bytes), stream_of(ec)>>>(args...);
  check_launch(name);
}

// Whether the tensor-core kernels take a call: bf16 heads of a width they are
// instantiated for, the tensors on 16-byte boundaries (their tiles load 16
// bytes at a time; allocations are, views need not be).
inline bool tensor_cores(DType dt, int64_t D) {
  return dt == DType::bf16 && (D == 16 || D == 32 || D == 64 || D == 128);
}
inline bool tensor_cores(const Dims& d, DType dt, std::initializer_list<const Tensor*> tensors) {
  if (!tensor_cores(dt, d.D)) return false;
  for (const Tensor* t : tensors) {
    if (reinterpret_cast<uintptr_t>(t->raw()) % 16 != 0) return false;
  }
  return true;
}

// Calls fn.template operator()<D>() for a head width tensor_cores accepts.
template <typename Fn>
void dispatch_tc_head_dim(int64_t D, Fn&& fn) {
  switch (D) {
    case 16: return fn.template operator()<16>();
    case 32: return fn.template operator()<32>();
    case 64: return fn.template operator()<64>();
    default: return fn.template operator()<128>();
  }
}

// Keeps t when it already has the shape and dtype, so steady-state calls reuse it.
inline void ensure(const ExecContext& ec, Tensor& t, const Shape& shape, DType dtype) {
  if (!t.defined() || !(t.shape() == shape) || t.dtype() != dtype) t = ec.empty(shape, dtype);
}

}  // namespace weft::kernels::cuda
