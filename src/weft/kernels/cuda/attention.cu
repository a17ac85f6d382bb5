#include <mma.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "weft/kernels/attention_dims.h"
#include "weft/kernels/cuda/common.cuh"
#include "weft/kernels/cuda/philox.cuh"
#include "weft/kernels/impl/attention.h"

namespace weft::kernels::impl {

// The launch and element helpers of kernels/cuda/ (common.cuh and its kin).
using namespace cuda;

namespace {

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
Dims check_qkv(const Tensor& qkv, const AttentionConfig& cfg) {
  const Dims d = detail::attention_dims(qkv, cfg);
  WEFT_CHECK(d.D <= kMaxHeadDim, "CUDA attention supports head dimensions up to {}, got {}",
             kMaxHeadDim, d.D);
  // Heads of batch entries are the grid's y dimension.
  WEFT_CHECK(d.B * d.H <= 65535,
             "CUDA attention supports up to 65535 batch entries × heads, got {}", d.B * d.H);
  return d;
}

// What every kernel reads: the layout, the softmax scale and the dropout stream.
struct Params {
  int64_t B, T, H, C;
  int D;
  bool sequence_major, causal;
  float inv_sqrt_d, dropout, keep_scale;
  uint64_t seed, offset;

  // The row of token (b, t) in the activations.
  __device__ int64_t row(int64_t b, int64_t t) const {
    return sequence_major ? t * B + b : b * T + t;
  }
  __device__ bool visible(int64_t t, int64_t j) const { return !causal || j <= t; }
  // Whether dropout keeps the weight of key j in row t of head bh: stream
  // number offset + (bh·T + t)·T + j, as the CPU kernels draw it.
  __device__ bool kept(int64_t bh, int64_t t, int64_t j) const {
    return uniform_at(seed, offset, static_cast<uint64_t>((bh * T + t) * T + j)) >= dropout;
  }
};

Params make_params(const Dims& d, const AttentionConfig& cfg) {
  Params p{};
  p.B = d.B;
  p.T = d.T;
  p.H = d.H;
  p.C = d.C;
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

// One block per (query block, head): rows q0 .. q0+kRows-1 of head
// blockIdx.y over tiles of keys with an online softmax.
template <typename T, int G, int DL>
__global__ void __launch_bounds__(kRows* G)
    forward_kernel(const T* __restrict__ qkv, T* __restrict__ out, float* __restrict__ lse,
                   Params p) {
  extern __shared__ float smem[];
  float* ks = smem;              // (kTile, D) keys
  float* vs = ks + kTile * p.D;  // (kTile, D) values
  float* ss = vs + kTile * p.D;  // (kRows, kTile + 1) scores of the tile
  const int64_t bh = blockIdx.y, b = bh / p.H, h = bh % p.H;
  // The last query blocks see the most keys: they are scheduled first.
  const int64_t q0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * kRows;
  const int r = static_cast<int>(threadIdx.x) / G, g = static_cast<int>(threadIdx.x) % G;
  const int64_t t = q0 + r, width = 3 * p.C;
  const bool row_ok = t < p.T;
  const bool dropout = p.dropout > 0.0f;
  float* srow = ss + r * (kTile + 1);

  float q[DL], acc[DL];
#pragma unroll
  for (int c = 0; c < DL; ++c) {
    const int d = g + G * c;
    q[c] = row_ok && d < p.D ? load_f(qkv, p.row(b, t) * width + h * p.D + d) : 0.0f;
    acc[c] = 0.0f;
  }
  float max = -INFINITY, sum = 0.0f;
  const int64_t key_end = p.causal ? std::min<int64_t>(p.T, q0 + kRows) : p.T;
  for (int64_t k0 = 0; k0 < key_end; k0 += kTile) {
    const int n = static_cast<int>(std::min<int64_t>(kTile, key_end - k0));
    __syncthreads();  // every thread is done with the previous tile
    load_tile(ks, qkv, width, p.C + h * p.D, p, b, k0, n);
    load_tile(vs, qkv, width, 2 * p.C + h * p.D, p, b, k0, n);
    __syncthreads();

    float tile_max = -INFINITY;
    for (int j = 0; j < n; ++j) {
      float partial = 0.0f;
#pragma unroll
      for (int c = 0; c < DL; ++c) {
        const int d = g + G * c;
        if (d < p.D) partial += q[c] * ks[j * p.D + d];
      }
      float s = group_sum<G>(partial) * p.inv_sqrt_d;
      if (!p.visible(t, k0 + j)) s = -INFINITY;
      if (g == 0) srow[j] = s;
      tile_max = fmaxf(tile_max, s);
    }
    __syncwarp();
    // Rescale what earlier tiles added by e^(old max - new max) (0 while
    // nothing was added: the old max is -inf then).
    const float new_max = fmaxf(max, tile_max);
    if (new_max != -INFINITY) {
      const float rescale = expf(max - new_max);
      sum *= rescale;
#pragma unroll
      for (int c = 0; c < DL; ++c) acc[c] *= rescale;
      max = new_max;
    }
    // The G threads of a row draw the dropout decisions of G keys at once
    // and pass them around.
    for (int j0 = 0; j0 < n; j0 += G) {
      const int kept_here = !dropout || p.kept(bh, t, k0 + j0 + g);
      for (int u = 0; u < G && j0 + u < n; ++u) {
        const int j = j0 + u;
        const int keep = __shfl_sync(0xffffffffu, kept_here, group_leader<G>() + u);
        const float s = srow[j];
        const float e = s == -INFINITY ? 0.0f : expf(s - max);
        sum += e;
        const float w = operand<T>(dropout ? (keep ? e * p.keep_scale : 0.0f) : e);
#pragma unroll
        for (int c = 0; c < DL; ++c) {
          const int d = g + G * c;
          if (d < p.D) acc[c] += w * vs[j * p.D + d];
        }
      }
    }
  }
  if (row_ok) {
    const float inv = 1.0f / sum;
#pragma unroll
    for (int c = 0; c < DL; ++c) {
      const int d = g + G * c;
      if (d < p.D) store_f(out, p.row(b, t) * p.C + h * p.D + d, acc[c] * inv);
    }
    if (g == 0) lse[bh * p.T + t] = max + logf(sum);
  }
}

// delta (B·H·T) = Σ_d dO·O per row of every head: one warp per row.
template <typename T>
__global__ void delta_kernel(const T* __restrict__ out, const T* __restrict__ dout,
                             float* __restrict__ delta, Params p) {
  const int64_t rows = p.B * p.H * p.T;
  const int64_t warps = blockDim.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int64_t i = blockIdx.x * warps + threadIdx.x / 32; i < rows; i += gridDim.x * warps) {
    const int64_t t = i % p.T, bh = i / p.T, b = bh / p.H, h = bh % p.H;
    const int64_t base = p.row(b, t) * p.C + h * p.D;
    float dot = 0.0f;
    for (int d = lane; d < p.D; d += 32) dot += load_f(out, base + d) * load_f(dout, base + d);
    dot = warp_sum(dot);
    if (lane == 0) delta[i] = dot;
  }
}

// One block per (key block, head): dK and dV of keys k0 .. k0+kRows-1 over
// tiles of the query rows that see them.
template <typename T, int G, int DL>
__global__ void __launch_bounds__(kRows* G)
    dkdv_kernel(const T* __restrict__ qkv, const T* __restrict__ dout,
                const float* __restrict__ lse, const float* __restrict__ delta,
                T* __restrict__ dqkv, Params p) {
  extern __shared__ float smem[];
  float* qs = smem;                 // (kTile, D) queries
  float* gs = qs + kTile * p.D;     // (kTile, D) output gradients
  float* lse_s = gs + kTile * p.D;  // (kTile)
  float* delta_s = lse_s + kTile;   // (kTile)
  const int64_t bh = blockIdx.y, b = bh / p.H, h = bh % p.H;
  // The first key blocks are seen by the most queries: they are scheduled first.
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int r = static_cast<int>(threadIdx.x) / G, g = static_cast<int>(threadIdx.x) % G;
  const int64_t j = k0 + r, width = 3 * p.C;
  const bool key_ok = j < p.T;
  const bool dropout = p.dropout > 0.0f;

  float k[DL], v[DL], dk[DL], dv[DL];
#pragma unroll
  for (int c = 0; c < DL; ++c) {
    const int d = g + G * c;
    const bool ok = key_ok && d < p.D;
    k[c] = ok ? load_f(qkv, p.row(b, j) * width + p.C + h * p.D + d) : 0.0f;
    v[c] = ok ? load_f(qkv, p.row(b, j) * width + 2 * p.C + h * p.D + d) : 0.0f;
    dk[c] = 0.0f;
    dv[c] = 0.0f;
  }
  // Under the causal mask, query rows before k0 see none of these keys.
  for (int64_t q0 = p.causal ? k0 : 0; q0 < p.T; q0 += kTile) {
    const int m = static_cast<int>(std::min<int64_t>(kTile, p.T - q0));
    __syncthreads();
    load_tile(qs, qkv, width, h * p.D, p, b, q0, m);
    load_tile(gs, dout, p.C, h * p.D, p, b, q0, m);
    for (int i = static_cast<int>(threadIdx.x); i < kTile; i += static_cast<int>(blockDim.x)) {
      lse_s[i] = i < m ? lse[bh * p.T + q0 + i] : 0.0f;
      delta_s[i] = i < m ? delta[bh * p.T + q0 + i] : 0.0f;
    }
    __syncthreads();
    for (int i0 = 0; i0 < m; i0 += G) {
      const int kept_here = !dropout || p.kept(bh, q0 + i0 + g, j);
      for (int u = 0; u < G && i0 + u < m; ++u) {
        const int i = i0 + u;
        const int keep = __shfl_sync(0xffffffffu, kept_here, group_leader<G>() + u);
        float sp = 0.0f, dpp = 0.0f;
#pragma unroll
        for (int c = 0; c < DL; ++c) {
          const int d = g + G * c;
          if (d < p.D) {
            sp += qs[i * p.D + d] * k[c];
            dpp += gs[i * p.D + d] * v[c];
          }
        }
        const float s = group_sum<G>(sp) * p.inv_sqrt_d;
        const float dpv = group_sum<G>(dpp);
        const float prob = key_ok && p.visible(q0 + i, j) ? expf(s - lse_s[i]) : 0.0f;
        float w = prob, dp = dpv;
        if (dropout) {
          w = keep ? prob * p.keep_scale : 0.0f;
          dp = keep ? dpv * p.keep_scale : 0.0f;
        }
        w = operand<T>(w);
        const float ds = operand<T>(prob * (dp - delta_s[i]));
#pragma unroll
        for (int c = 0; c < DL; ++c) {
          const int d = g + G * c;
          if (d < p.D) {
            dv[c] += w * gs[i * p.D + d];
            dk[c] += ds * qs[i * p.D + d];
          }
        }
      }
    }
  }
  if (key_ok) {
#pragma unroll
    for (int c = 0; c < DL; ++c) {
      const int d = g + G * c;
      if (d < p.D) {
        store_f(dqkv, p.row(b, j) * width + p.C + h * p.D + d, dk[c] * p.inv_sqrt_d);
        store_f(dqkv, p.row(b, j) * width + 2 * p.C + h * p.D + d, dv[c]);
      }
    }
  }
}

// One block per (query block, head): dQ of rows q0 .. q0+kRows-1 over tiles
// of the keys they see.
template <typename T, int G, int DL>
__global__ void __launch_bounds__(kRows* G)
    dq_kernel(const T* __restrict__ qkv, const T* __restrict__ dout, const float* __restrict__ lse,
              const float* __restrict__ delta, T* __restrict__ dqkv, Params p) {
  extern __shared__ float smem[];
  float* ks = smem;              // (kTile, D) keys
  float* vs = ks + kTile * p.D;  // (kTile, D) values
  const int64_t bh = blockIdx.y, b = bh / p.H, h = bh % p.H;
  const int64_t q0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * kRows;
  const int r = static_cast<int>(threadIdx.x) / G, g = static_cast<int>(threadIdx.x) % G;
  const int64_t t = q0 + r, width = 3 * p.C;
  const bool row_ok = t < p.T;
  const bool dropout = p.dropout > 0.0f;

  float q[DL], gd[DL], dq[DL];
#pragma unroll
  for (int c = 0; c < DL; ++c) {
    const int d = g + G * c;
    const bool ok = row_ok && d < p.D;
    q[c] = ok ? load_f(qkv, p.row(b, t) * width + h * p.D + d) : 0.0f;
    gd[c] = ok ? load_f(dout, p.row(b, t) * p.C + h * p.D + d) : 0.0f;
    dq[c] = 0.0f;
  }
  const float row_lse = row_ok ? lse[bh * p.T + t] : 0.0f;
  const float row_delta = row_ok ? delta[bh * p.T + t] : 0.0f;
  const int64_t key_end = p.causal ? std::min<int64_t>(p.T, q0 + kRows) : p.T;
  for (int64_t k0 = 0; k0 < key_end; k0 += kTile) {
    const int n = static_cast<int>(std::min<int64_t>(kTile, key_end - k0));
    __syncthreads();
    load_tile(ks, qkv, width, p.C + h * p.D, p, b, k0, n);
    load_tile(vs, qkv, width, 2 * p.C + h * p.D, p, b, k0, n);
    __syncthreads();
    for (int j0 = 0; j0 < n; j0 += G) {
      const int kept_here = !dropout || p.kept(bh, t, k0 + j0 + g);
      for (int u = 0; u < G && j0 + u < n; ++u) {
        const int j = j0 + u;
        const int keep = __shfl_sync(0xffffffffu, kept_here, group_leader<G>() + u);
        float sp = 0.0f, dpp = 0.0f;
#pragma unroll
        for (int c = 0; c < DL; ++c) {
          const int d = g + G * c;
          if (d < p.D) {
            sp += q[c] * ks[j * p.D + d];
            dpp += gd[c] * vs[j * p.D + d];
          }
        }
        const float s = group_sum<G>(sp) * p.inv_sqrt_d;
        const float dpv = group_sum<G>(dpp);
        const float prob = row_ok && p.visible(t, k0 + j) ? expf(s - row_lse) : 0.0f;
        const float dp = dropout ? (keep ? dpv * p.keep_scale : 0.0f) : dpv;
        const float ds = operand<T>(prob * (dp - row_delta));
#pragma unroll
        for (int c = 0; c < DL; ++c) {
          const int d = g + G * c;
          if (d < p.D) dq[c] += ds * ks[j * p.D + d];
        }
      }
    }
  }
  if (row_ok) {
#pragma unroll
    for (int c = 0; c < DL; ++c) {
      const int d = g + G * c;
      if (d < p.D) store_f(dqkv, p.row(b, t) * width + h * p.D + d, dq[c] * p.inv_sqrt_d);
    }
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

// forward_kernel on tensor cores (same grid, kTcThreads threads).
template <int D>
__global__ void __launch_bounds__(kTcThreads)
    tc_forward_kernel(const uint16_t* __restrict__ qkv, uint16_t* __restrict__ out,
                      float* __restrict__ lse, Params p) {
  using S = TcSizes<D>;
  extern __shared__ __align__(128) unsigned char tc_smem[];
  bf16* qs = reinterpret_cast<bf16*>(tc_smem);
  bf16* ks = qs + kTile * S::ld;
  bf16* vs = ks + kTile * S::ld;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  float* scores = reinterpret_cast<float*>(vs + kTile * S::ld) + warp * 16 * kScoreLd;
  float* acc = reinterpret_cast<float*>(tc_smem + 3 * S::tile + S::scores) + warp * 16 * S::acc_ld;
  const bf16* weights = reinterpret_cast<const bf16*>(scores);
  const int64_t bh = blockIdx.y, b = bh / p.H, h = bh % p.H;
  // The last query blocks see the most keys: they are scheduled first.
  const int64_t q0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * kRows;
  const int64_t t0 = q0 + warp * 16, width = 3 * p.C;
  const bool dropout = p.dropout > 0.0f;

  tc_load_tile<D>(qs, qkv, width, h * D, p, b, q0,
                  static_cast<int>(std::min<int64_t>(kRows, p.T - q0)));
  tc_zero<D>(acc, lane);
  // Row statistics of the warp's rows; every lane holds all 16 (the loops
  // over rows are unrolled, so they stay in registers).
  float max[16], sum[16];
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    max[r] = -INFINITY;
    sum[r] = 0.0f;
  }
  const int64_t key_end = p.causal ? std::min<int64_t>(p.T, q0 + kRows) : p.T;
  for (int64_t k0 = 0; k0 < key_end; k0 += kTile) {
    const int n = static_cast<int>(std::min<int64_t>(kTile, key_end - k0));
    __syncthreads();  // every warp is done with the previous tile
    tc_load_tile<D>(ks, qkv, width, p.C + h * D, p, b, k0, n);
    tc_load_tile<D>(vs, qkv, width, 2 * p.C + h * D, p, b, k0, n);
    __syncthreads();
    tc_product_nt<D>(scores, qs + warp * 16 * S::ld, ks);
    __syncwarp();
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      const int64_t t = t0 + r;
      const float2 pair = tc_pair(scores, r, lane);
      float s[2] = {pair.x * p.inv_sqrt_d, pair.y * p.inv_sqrt_d};
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int j = 2 * lane + u;
        if (j >= n || !p.visible(t, k0 + j)) s[u] = -INFINITY;
      }
      const float new_max = fmaxf(max[r], warp_max(fmaxf(s[0], s[1])));
      // Rescale what earlier tiles added by e^(old max - new max) (0 while
      // nothing was added: the old max is -inf then).
      const float rescale = new_max == -INFINITY ? 1.0f : expf(max[r] - new_max);
      max[r] = new_max;
      float e[2];
#pragma unroll
      for (int u = 0; u < 2; ++u) e[u] = s[u] == -INFINITY ? 0.0f : expf(s[u] - new_max);
      sum[r] = sum[r] * rescale + warp_sum(e[0] + e[1]);
      for (int c = lane; c < D; c += 32) acc[r * S::acc_ld + c] *= rescale;
      if (dropout) {
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          e[u] = p.kept(bh, t, k0 + 2 * lane + u) ? e[u] * p.keep_scale : 0.0f;
        }
      }
      __syncwarp();  // every lane has read row r
      tc_put_pair(scores, r, lane, e[0], e[1]);
    }
    __syncwarp();
    tc_accumulate<D>(acc, weights, vs);
  }
  __syncwarp();
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int64_t t = t0 + r;
    if (t >= p.T) break;
    const float inv = 1.0f / sum[r];
    for (int c = lane; c < D; c += 32) {
      store_f(out, p.row(b, t) * p.C + h * D + c, acc[r * S::acc_ld + c] * inv);
    }
    if (lane == 0) lse[bh * p.T + t] = max[r] + logf(sum[r]);
  }
}

// Stages lse and delta of rows first .. first+count-1 of head bh into
// shared memory (0 from count on).
__device__ void tc_load_rows(float* lse_s, float* delta_s, const float* lse, const float* delta,
                             const Params& p, int64_t bh, int64_t first, int count) {
  for (int i = static_cast<int>(threadIdx.x); i < kTile; i += kTcThreads) {
    lse_s[i] = i < count ? lse[bh * p.T + first + i] : 0.0f;
    delta_s[i] = i < count ? delta[bh * p.T + first + i] : 0.0f;
  }
}

// dkdv_kernel on tensor cores: each warp computes Sᵀ and dPᵀ of its 16 keys
// against a tile of queries (keys as rows), so that Pᵀ and dSᵀ are row-major
// operands of dV += Pᵀ·dO and dK += dSᵀ·Q.
template <int D>
__global__ void __launch_bounds__(kTcThreads)
    tc_dkdv_kernel(const uint16_t* __restrict__ qkv, const uint16_t* __restrict__ dout,
                   const float* __restrict__ lse, const float* __restrict__ delta,
                   uint16_t* __restrict__ dqkv, Params p) {
  using S = TcSizes<D>;
  extern __shared__ __align__(128) unsigned char tc_smem[];
  bf16* ks = reinterpret_cast<bf16*>(tc_smem);
  bf16* vs = ks + kTile * S::ld;
  bf16* qs = vs + kTile * S::ld;
  bf16* gs = qs + kTile * S::ld;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  unsigned char* rest = tc_smem + 4 * S::tile;
  float* scores = reinterpret_cast<float*>(rest) + warp * 16 * kScoreLd;
  float* dps = reinterpret_cast<float*>(rest + S::scores) + warp * 16 * kScoreLd;
  float* dk = reinterpret_cast<float*>(rest + 2 * S::scores) + warp * 16 * S::acc_ld;
  float* dv = reinterpret_cast<float*>(rest + 2 * S::scores + S::acc) + warp * 16 * S::acc_ld;
  float* lse_s = reinterpret_cast<float*>(rest + 2 * S::scores + 2 * S::acc);
  float* delta_s = lse_s + kTile;
  const int64_t bh = blockIdx.y, b = bh / p.H, h = bh % p.H;
  // The first key blocks are seen by the most queries: they are scheduled first.
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int64_t j0 = k0 + warp * 16, width = 3 * p.C;
  const bool dropout = p.dropout > 0.0f;

  const int keys = static_cast<int>(std::min<int64_t>(kRows, p.T - k0));
  tc_load_tile<D>(ks, qkv, width, p.C + h * D, p, b, k0, keys);
  tc_load_tile<D>(vs, qkv, width, 2 * p.C + h * D, p, b, k0, keys);
  tc_zero<D>(dk, lane);
  tc_zero<D>(dv, lane);
  // Under the causal mask, query rows before k0 see none of these keys.
  for (int64_t q0 = p.causal ? k0 : 0; q0 < p.T; q0 += kTile) {
    const int m = static_cast<int>(std::min<int64_t>(kTile, p.T - q0));
    __syncthreads();
    tc_load_tile<D>(qs, qkv, width, h * D, p, b, q0, m);
    tc_load_tile<D>(gs, dout, p.C, h * D, p, b, q0, m);
    tc_load_rows(lse_s, delta_s, lse, delta, p, bh, q0, m);
    __syncthreads();
    tc_product_nt<D>(scores, ks + warp * 16 * S::ld, qs);
    tc_product_nt<D>(dps, vs + warp * 16 * S::ld, gs);
    __syncwarp();
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      const int64_t j = j0 + r;
      const float2 s = tc_pair(scores, r, lane), dpv = tc_pair(dps, r, lane);
      const float sv[2] = {s.x, s.y}, dpair[2] = {dpv.x, dpv.y};
      float w[2], ds[2];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int i = 2 * lane + u;
        const int64_t t = q0 + i;
        const bool seen = i < m && j < p.T && p.visible(t, j);
        const float prob = seen ? expf(sv[u] * p.inv_sqrt_d - lse_s[i]) : 0.0f;
        float dp = dpair[u];
        w[u] = prob;
        if (dropout) {
          const bool keep = seen && p.kept(bh, t, j);
          w[u] = keep ? prob * p.keep_scale : 0.0f;
          dp = keep ? dp * p.keep_scale : 0.0f;
        }
        ds[u] = prob * (dp - delta_s[i]);
      }
      __syncwarp();  // every lane has read row r
      tc_put_pair(scores, r, lane, w[0], w[1]);
      tc_put_pair(dps, r, lane, ds[0], ds[1]);
    }
    __syncwarp();
    tc_accumulate<D>(dv, reinterpret_cast<const bf16*>(scores), gs);
    tc_accumulate<D>(dk, reinterpret_cast<const bf16*>(dps), qs);
  }
  __syncwarp();
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int64_t j = j0 + r;
    if (j >= p.T) break;
    for (int c = lane; c < D; c += 32) {
      store_f(dqkv, p.row(b, j) * width + p.C + h * D + c, dk[r * S::acc_ld + c] * p.inv_sqrt_d);
      store_f(dqkv, p.row(b, j) * width + 2 * p.C + h * D + c, dv[r * S::acc_ld + c]);
    }
  }
}

// dq_kernel on tensor cores.
template <int D>
__global__ void __launch_bounds__(kTcThreads)
    tc_dq_kernel(const uint16_t* __restrict__ qkv, const uint16_t* __restrict__ dout,
                 const float* __restrict__ lse, const float* __restrict__ delta,
                 uint16_t* __restrict__ dqkv, Params p) {
  using S = TcSizes<D>;
  extern __shared__ __align__(128) unsigned char tc_smem[];
  bf16* qs = reinterpret_cast<bf16*>(tc_smem);
  bf16* gs = qs + kTile * S::ld;
  bf16* ks = gs + kTile * S::ld;
  bf16* vs = ks + kTile * S::ld;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  unsigned char* rest = tc_smem + 4 * S::tile;
  float* scores = reinterpret_cast<float*>(rest) + warp * 16 * kScoreLd;
  float* dps = reinterpret_cast<float*>(rest + S::scores) + warp * 16 * kScoreLd;
  float* dq = reinterpret_cast<float*>(rest + 2 * S::scores) + warp * 16 * S::acc_ld;
  float* lse_s = reinterpret_cast<float*>(rest + 2 * S::scores + S::acc);
  float* delta_s = lse_s + kTile;
  const int64_t bh = blockIdx.y, b = bh / p.H, h = bh % p.H;
  const int64_t q0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * kRows;
  const int64_t t0 = q0 + warp * 16, width = 3 * p.C;
  const bool dropout = p.dropout > 0.0f;

  const int m = static_cast<int>(std::min<int64_t>(kRows, p.T - q0));
  tc_load_tile<D>(qs, qkv, width, h * D, p, b, q0, m);
  tc_load_tile<D>(gs, dout, p.C, h * D, p, b, q0, m);
  tc_load_rows(lse_s, delta_s, lse, delta, p, bh, q0, m);
  tc_zero<D>(dq, lane);
  const int64_t key_end = p.causal ? std::min<int64_t>(p.T, q0 + kRows) : p.T;
  for (int64_t k0 = 0; k0 < key_end; k0 += kTile) {
    const int n = static_cast<int>(std::min<int64_t>(kTile, key_end - k0));
    __syncthreads();
    tc_load_tile<D>(ks, qkv, width, p.C + h * D, p, b, k0, n);
    tc_load_tile<D>(vs, qkv, width, 2 * p.C + h * D, p, b, k0, n);
    __syncthreads();
    tc_product_nt<D>(scores, qs + warp * 16 * S::ld, ks);
    tc_product_nt<D>(dps, gs + warp * 16 * S::ld, vs);
    __syncwarp();
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      const int64_t t = t0 + r;
      const float row_lse = lse_s[warp * 16 + r], row_delta = delta_s[warp * 16 + r];
      const float2 s = tc_pair(scores, r, lane), dpv = tc_pair(dps, r, lane);
      const float sv[2] = {s.x, s.y}, dpair[2] = {dpv.x, dpv.y};
      float ds[2];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        const int j = 2 * lane + u;
        const bool seen = t < p.T && j < n && p.visible(t, k0 + j);
        const float prob = seen ? expf(sv[u] * p.inv_sqrt_d - row_lse) : 0.0f;
        float dp = dpair[u];
        if (dropout) dp = seen && p.kept(bh, t, k0 + j) ? dp * p.keep_scale : 0.0f;
        ds[u] = prob * (dp - row_delta);
      }
      __syncwarp();  // every lane has read row r
      tc_put_pair(scores, r, lane, ds[0], ds[1]);
    }
    __syncwarp();
    tc_accumulate<D>(dq, reinterpret_cast<const bf16*>(scores), ks);
  }
  __syncwarp();
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int64_t t = t0 + r;
    if (t >= p.T) break;
    for (int c = lane; c < D; c += 32) {
      store_f(dqkv, p.row(b, t) * width + h * D + c, dq[r * S::acc_ld + c] * p.inv_sqrt_d);
    }
  }
}

__global__ void dropout_mask_kernel(uint8_t* __restrict__ mask, Params p) {
  const int64_t n = p.B * p.H * p.T * p.T;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = i % p.T, t = i / p.T % p.T;
    // Entry i of the (B·H, T, T) weights is stream number offset + i.
    mask[i] =
        p.visible(t, j) && uniform_at(p.seed, p.offset, static_cast<uint64_t>(i)) >= p.dropout;
  }
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
bool tensor_cores(DType dt, int64_t D) {
  return dt == DType::bf16 && (D == 16 || D == 32 || D == 64 || D == 128);
}
bool tensor_cores(const Dims& d, DType dt, std::initializer_list<const Tensor*> tensors) {
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
void ensure(const ExecContext& ec, Tensor& t, const Shape& shape, DType dtype) {
  if (!t.defined() || !(t.shape() == shape) || t.dtype() != dtype) t = ec.empty(shape, dtype);
}

}  // namespace

template <>
void attention_forward<Backend::cuda>(const ExecContext& ec, const Tensor& qkv,
                                      const AttentionConfig& cfg, Tensor& out,
                                      AttentionSaved& saved, AttentionWorkspace&) {
  const Dims d = check_qkv(qkv, cfg);
  const DType dt = qkv.dtype();
  ensure(ec, saved.lse, {d.B, d.H, d.T}, DType::f32);
  saved.out = out;
  if (d.B * d.T == 0) return;
  const Params p = make_params(d, cfg);
  const int64_t blocks = (d.T + kRows - 1) / kRows;
  if (tensor_cores(d, dt, {&qkv})) {
    dispatch_tc_head_dim(d.D, [&]<int D>() {
      launch(ec, "attention_forward", tc_forward_kernel<D>, blocks, d.B * d.H, kTcThreads,
             TcSizes<D>::forward, dptr<uint16_t>(qkv), dptr<uint16_t>(out), dptr<float>(saved.lse),
             p);
    });
    return;
  }
  dispatch_float(dt, "attention_forward", [&]<typename T>() {
    dispatch_head_dim(d.D, [&]<int G, int DL>() {
      launch(ec, "attention_forward", forward_kernel<T, G, DL>, blocks, d.B * d.H, kRows * G,
             (2 * kTile * d.D + kRows * (kTile + 1)) * 4, dptr<T>(qkv), dptr<T>(out),
             dptr<float>(saved.lse), p);
    });
  });
}

template <>
void attention_backward<Backend::cuda>(const ExecContext& ec, const Tensor& dout, const Tensor& qkv,
                                       const AttentionSaved& saved, const AttentionConfig& cfg,
                                       Tensor& dqkv, AttentionWorkspace& workspace) {
  const Dims d = check_qkv(qkv, cfg);
  const DType dt = qkv.dtype();
  if (d.B * d.T == 0) return;

  // The workspace holds delta = Σ_d dO·O of every row.
  const int64_t delta_bytes = d.B * d.H * d.T * static_cast<int64_t>(sizeof(float));
  if (!workspace.buffer.defined() || workspace.buffer.nbytes() < delta_bytes) {
    workspace.buffer = ec.empty({delta_bytes}, DType::u8);
  }
  float* delta = dptr<float>(workspace.buffer);
  const Params p = make_params(d, cfg);
  const int64_t blocks = (d.T + kRows - 1) / kRows;
  const bool tc = tensor_cores(d, dt, {&qkv, &dout});
  dispatch_float(dt, "attention_backward", [&]<typename T>() {
    constexpr int kDeltaThreads = 256;
    delta_kernel<T>
        <<<blocks_for(d.B * d.H * d.T, kDeltaThreads / 32), kDeltaThreads, 0, stream_of(ec)>>>(
            dptr<T>(saved.out), dptr<T>(dout), delta, p);
    check_launch("attention_backward (delta)");
    if (tc) return;  // launched below
    dispatch_head_dim(d.D, [&]<int G, int DL>() {
      launch(ec, "attention_backward (dK, dV)", dkdv_kernel<T, G, DL>, blocks, d.B * d.H, kRows * G,
             (2 * kTile * d.D + 2 * kTile) * 4, dptr<T>(qkv), dptr<T>(dout), dptr<float>(saved.lse),
             static_cast<const float*>(delta), dptr<T>(dqkv), p);
      launch(ec, "attention_backward (dQ)", dq_kernel<T, G, DL>, blocks, d.B * d.H, kRows * G,
             2 * kTile * d.D * 4, dptr<T>(qkv), dptr<T>(dout), dptr<float>(saved.lse),
             static_cast<const float*>(delta), dptr<T>(dqkv), p);
    });
  });
  if (tc) {
    dispatch_tc_head_dim(d.D, [&]<int D>() {
      launch(ec, "attention_backward (dK, dV)", tc_dkdv_kernel<D>, blocks, d.B * d.H, kTcThreads,
             TcSizes<D>::dkdv, dptr<uint16_t>(qkv), dptr<uint16_t>(dout), dptr<float>(saved.lse),
             static_cast<const float*>(delta), dptr<uint16_t>(dqkv), p);
      launch(ec, "attention_backward (dQ)", tc_dq_kernel<D>, blocks, d.B * d.H, kTcThreads,
             TcSizes<D>::dq, dptr<uint16_t>(qkv), dptr<uint16_t>(dout), dptr<float>(saved.lse),
             static_cast<const float*>(delta), dptr<uint16_t>(dqkv), p);
    });
  }
}

template <>
const char* attention_path<Backend::cuda>(DType dtype, int64_t head_dim) {
  return tensor_cores(dtype, head_dim) ? "tensor cores" : "CUDA cores";
}

template <>
Tensor attention_dropout_mask<Backend::cuda>(const ExecContext& ec, const AttentionConfig& cfg,
                                             int64_t batch, int64_t seq) {
  if (cfg.dropout <= 0.0f) return Tensor();
  Tensor mask = ec.empty({batch, cfg.heads, seq, seq}, DType::u8);
  const int64_t n = mask.numel();
  if (n == 0) return mask;
  const Params p = make_params({batch, seq, cfg.heads, cfg.heads, 1, false}, cfg);
  constexpr int kThreads = 256;
  dropout_mask_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream_of(ec)>>>(dptr<uint8_t>(mask),
                                                                               p);
  check_launch("attention_dropout_mask");
  return mask;
}

}  // namespace weft::kernels::impl
