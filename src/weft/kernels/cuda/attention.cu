#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "weft/kernels/cuda/attention.h"
#include "weft/kernels/cuda/common.cuh"
#include "weft/kernels/cuda/philox.cuh"

namespace weft::kernels::cuda {

namespace {

// Query rows (forward, dQ) or keys (dK/dV) per thread block, and keys
// (queries) per shared-memory tile. A group of G consecutive threads of a warp
// owns one row, each thread DL of its head dimensions (d = g, g + G, ...), so
// that the G threads read consecutive words of a tile row while the other
// groups of the warp read the same row (a broadcast).
constexpr int kRows = 64;
constexpr int kTile = 64;
constexpr int64_t kMaxHeadDim = 128;

struct Dims {
  int64_t B, T, C, H, D;
  bool sequence_major;

  Shape tokens(int64_t width) const {
    return sequence_major ? Shape{T, B, width} : Shape{B, T, width};
  }
};

Dims check_qkv(const Tensor& qkv, const AttentionConfig& cfg) {
  WEFT_CHECK(qkv.dtype() == DType::f32 || qkv.dtype() == DType::bf16,
             "attention qkv must be f32 or bf16, got {}", dtype_name(qkv.dtype()));
  WEFT_CHECK(qkv.dim() == 3, "attention qkv must be {}, got shape {}",
             cfg.sequence_major ? "(T, B, 3C)" : "(B, T, 3C)", qkv.shape());
  WEFT_CHECK(cfg.heads >= 1, "attention needs at least one head, got {}", cfg.heads);
  const int64_t width = qkv.size(2);
  WEFT_CHECK(width > 0 && width % (3 * cfg.heads) == 0,
             "attention qkv {} must have a last dimension 3·C with C divisible by the {} heads",
             qkv.shape(), cfg.heads);
  WEFT_CHECK(cfg.dropout >= 0.0f && cfg.dropout < 1.0f,
             "attention dropout must lie in [0, 1), got {}", cfg.dropout);
  const int64_t C = width / 3;
  const int64_t B = cfg.sequence_major ? qkv.size(1) : qkv.size(0);
  const int64_t T = cfg.sequence_major ? qkv.size(0) : qkv.size(1);
  const Dims d{B, T, C, cfg.heads, C / cfg.heads, cfg.sequence_major};
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

// Launches kernel on (blocks, B·H) blocks of kRows·G threads with `floats`
// floats of dynamic shared memory (above the default 48 KiB for large heads).
template <int G, typename Kernel, typename... Args>
void launch(const ExecContext& ec, const char* name, Kernel kernel, int64_t blocks, int64_t heads,
            int64_t floats, Args... args) {
  const int bytes = static_cast<int>(floats * static_cast<int64_t>(sizeof(float)));
  WEFT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(heads));
  kernel<<<grid, kRows * G, static_cast<size_t>(bytes), stream_of(ec)>>>(args...);
  check_launch(name);
}

// Keeps t when it already has the shape and dtype, so steady-state calls reuse it.
void ensure(const ExecContext& ec, Tensor& t, const Shape& shape, DType dtype) {
  if (!t.defined() || !(t.shape() == shape) || t.dtype() != dtype) t = ec.empty(shape, dtype);
}

}  // namespace

void attention_forward(const ExecContext& ec, const Tensor& qkv, const AttentionConfig& cfg,
                       Tensor& out, AttentionSaved& saved, AttentionWorkspace&) {
  const Dims d = check_qkv(qkv, cfg);
  const DType dt = qkv.dtype();
  WEFT_CHECK(out.shape() == d.tokens(d.C) && out.dtype() == dt,
             "attention output must be {} {} for qkv {}, got {} {}", dtype_name(dt), d.tokens(d.C),
             qkv.shape(), dtype_name(out.dtype()), out.shape());
  ensure(ec, saved.lse, {d.B, d.H, d.T}, DType::f32);
  saved.out = out;
  if (d.B * d.T == 0) return;
  const Params p = make_params(d, cfg);
  const int64_t blocks = (d.T + kRows - 1) / kRows;
  dispatch_float(dt, "attention_forward", [&]<typename T>() {
    dispatch_head_dim(d.D, [&]<int G, int DL>() {
      launch<G>(ec, "attention_forward", forward_kernel<T, G, DL>, blocks, d.B * d.H,
                2 * kTile * d.D + kRows * (kTile + 1), dptr<T>(qkv), dptr<T>(out),
                dptr<float>(saved.lse), p);
    });
  });
}

void attention_backward(const ExecContext& ec, const Tensor& dout, const Tensor& qkv,
                        const AttentionSaved& saved, const AttentionConfig& cfg, Tensor& dqkv,
                        AttentionWorkspace& workspace) {
  const Dims d = check_qkv(qkv, cfg);
  const DType dt = qkv.dtype();
  WEFT_CHECK(dout.shape() == d.tokens(d.C) && dout.dtype() == dt,
             "attention output gradient must be {} {} for qkv {}, got {} {}", dtype_name(dt),
             d.tokens(d.C), qkv.shape(), dtype_name(dout.dtype()), dout.shape());
  WEFT_CHECK(dqkv.shape() == qkv.shape() && dqkv.dtype() == dt,
             "attention qkv gradient must be {} {} like qkv, got {} {}", dtype_name(dt),
             qkv.shape(), dtype_name(dqkv.dtype()), dqkv.shape());
  WEFT_CHECK(dqkv.raw() != qkv.raw() && dqkv.raw() != dout.raw(),
             "attention backward cannot write dqkv over qkv or dout");
  const Shape rows{d.B, d.H, d.T};
  WEFT_CHECK(saved.lse.defined() && saved.lse.shape() == rows && saved.lse.dtype() == DType::f32 &&
                 saved.out.defined() && saved.out.shape() == d.tokens(d.C) &&
                 saved.out.dtype() == dt,
             "attention backward needs the saved state of the forward of qkv {}: lse f32 {} and "
             "the output {} {}",
             qkv.shape(), rows, dtype_name(dt), d.tokens(d.C));
  if (d.B * d.T == 0) return;

  // The workspace holds delta = Σ_d dO·O of every row.
  const int64_t delta_bytes = d.B * d.H * d.T * static_cast<int64_t>(sizeof(float));
  if (!workspace.buffer.defined() || workspace.buffer.nbytes() < delta_bytes) {
    workspace.buffer = ec.empty({delta_bytes}, DType::u8);
  }
  float* delta = dptr<float>(workspace.buffer);
  const Params p = make_params(d, cfg);
  const int64_t blocks = (d.T + kRows - 1) / kRows;
  dispatch_float(dt, "attention_backward", [&]<typename T>() {
    constexpr int kDeltaThreads = 256;
    delta_kernel<T>
        <<<blocks_for(d.B * d.H * d.T, kDeltaThreads / 32), kDeltaThreads, 0, stream_of(ec)>>>(
            dptr<T>(saved.out), dptr<T>(dout), delta, p);
    check_launch("attention_backward (delta)");
    dispatch_head_dim(d.D, [&]<int G, int DL>() {
      launch<G>(ec, "attention_backward (dK, dV)", dkdv_kernel<T, G, DL>, blocks, d.B * d.H,
                2 * kTile * d.D + 2 * kTile, dptr<T>(qkv), dptr<T>(dout), dptr<float>(saved.lse),
                static_cast<const float*>(delta), dptr<T>(dqkv), p);
      launch<G>(ec, "attention_backward (dQ)", dq_kernel<T, G, DL>, blocks, d.B * d.H,
                2 * kTile * d.D, dptr<T>(qkv), dptr<T>(dout), dptr<float>(saved.lse),
                static_cast<const float*>(delta), dptr<T>(dqkv), p);
    });
  });
}

Tensor attention_dropout_mask(const ExecContext& ec, const AttentionConfig& cfg, int64_t batch,
                              int64_t seq) {
  if (cfg.dropout <= 0.0f) return Tensor();
  WEFT_CHECK(batch >= 0 && seq >= 0 && cfg.heads >= 1,
             "attention dropout mask needs a batch, length and head count, got {}, {}, {}", batch,
             seq, cfg.heads);
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

}  // namespace weft::kernels::cuda
