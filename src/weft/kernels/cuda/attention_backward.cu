// The backward kernels of the fused attention (kernels/impl/attention.h): delta,
// dK and dV per key block, dQ per query block.
#include <string_view>

#include "weft/kernels/cuda/attention_common.cuh"
#include "weft/kernels/cuda/attention_cudnn.h"
#include "weft/kernels/impl/attention.h"

namespace weft::kernels::impl {

// The launch and element helpers of kernels/cuda/ (common.cuh and its kin).
using namespace cuda;

namespace {

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

// Stages lse and delta of rows first .. first+count-1 of head bh into
// shared memory (0 from count on).
__device__ void load_rows(float* lse_s, float* delta_s, const float* lse, const float* delta,
                          const Params& p, int64_t bh, int64_t first, int count) {
  for (int i = static_cast<int>(threadIdx.x); i < kTile; i += static_cast<int>(blockDim.x)) {
    lse_s[i] = i < count ? lse[bh * p.T + first + i] : 0.0f;
    delta_s[i] = i < count ? delta[bh * p.T + first + i] : 0.0f;
  }
}

// dK (scaled by 1/sqrt(D)) and dV of key j of key/value head kvh, the G
// threads of its row writing DL dimensions each.
template <typename T, int G, int DL>
__device__ __forceinline__ void store_key_grads(T* dqkv, const float (&dk)[DL],
                                                const float (&dv)[DL], const Params& p, int64_t b,
                                                int64_t kvh, int64_t j, int g) {
#pragma unroll
  for (int c = 0; c < DL; ++c) {
    const int d = g + G * c;
    if (d < p.D) {
      store_f(dqkv, p.row(b, j) * p.W + p.k_column(kvh) + d, dk[c] * p.inv_sqrt_d);
      store_f(dqkv, p.row(b, j) * p.W + p.v_column(kvh) + d, dv[c]);
    }
  }
}

// The shares of the staged tile of m query rows from q0 on (queries qs,
// output gradients gs, their lse and delta) of query head bh in the dK and
// dV of key j held by the G threads of its row (k, v: its key and value).
template <typename T, int G, int DL>
__device__ __forceinline__ void dkdv_tile(const float* qs, const float* gs, const float* lse_s,
                                          const float* delta_s, const float (&k)[DL],
                                          const float (&v)[DL], float (&dk)[DL], float (&dv)[DL],
                                          int64_t bh, int64_t q0, int m, int64_t j, bool key_ok,
                                          int g, const Params& p) {
  const bool dropout = p.dropout > 0.0f;
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

// One block per (key block, key/value head kvh): dK and dV of keys k0 ..
// k0+kRows-1 over the query heads h = kvh, kvh + Hkv, ... that read them (in
// that order, so no other block adds to them), each over tiles of the query
// rows that see them.
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
  const int64_t b = blockIdx.y / p.Hkv, kvh = blockIdx.y % p.Hkv;
  // The first key blocks are seen by the most queries: they are scheduled first.
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int r = static_cast<int>(threadIdx.x) / G, g = static_cast<int>(threadIdx.x) % G;
  const int64_t j = k0 + r;
  const bool key_ok = j < p.T;

  float k[DL], v[DL], dk[DL], dv[DL];
#pragma unroll
  for (int c = 0; c < DL; ++c) {
    const int d = g + G * c;
    const bool ok = key_ok && d < p.D;
    k[c] = ok ? load_f(qkv, p.row(b, j) * p.W + p.k_column(kvh) + d) : 0.0f;
    v[c] = ok ? load_f(qkv, p.row(b, j) * p.W + p.v_column(kvh) + d) : 0.0f;
    dk[c] = 0.0f;
    dv[c] = 0.0f;
  }
  for (int64_t h = kvh; h < p.H; h += p.Hkv) {
    const int64_t bh = b * p.H + h;
    // Under the causal mask, query rows before k0 see none of these keys.
    for (int64_t q0 = p.causal ? k0 : 0; q0 < p.T; q0 += kTile) {
      const int m = static_cast<int>(std::min<int64_t>(kTile, p.T - q0));
      __syncthreads();
      load_tile(qs, qkv, p.W, h * p.D, p, b, q0, m);
      load_tile(gs, dout, p.C, h * p.D, p, b, q0, m);
      load_rows(lse_s, delta_s, lse, delta, p, bh, q0, m);
      __syncthreads();
      dkdv_tile<T, G, DL>(qs, gs, lse_s, delta_s, k, v, dk, dv, bh, q0, m, j, key_ok, g, p);
    }
  }
  if (key_ok) store_key_grads<T, G, DL>(dqkv, dk, dv, p, b, kvh, j, g);
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
  const int64_t t = q0 + r, width = p.W;
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
    load_tile(ks, qkv, width, p.k_column(h), p, b, k0, n);
    load_tile(vs, qkv, width, p.v_column(h), p, b, k0, n);
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

// dK (scaled by 1/sqrt(D)) and dV of a warp's 16 keys from j0 on of
// key/value head kvh, from their f32 accumulators (row stride D + 4).
template <int D>
__device__ __forceinline__ void tc_store_key_grads(uint16_t* dqkv, const float* dk, const float* dv,
                                                   const Params& p, int64_t b, int64_t kvh,
                                                   int64_t j0, int lane) {
  constexpr int ld = TcSizes<D>::acc_ld;
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int64_t j = j0 + r;
    if (j >= p.T) break;
    for (int c = lane; c < D; c += 32) {
      store_f(dqkv, p.row(b, j) * p.W + p.k_column(kvh) + c, dk[r * ld + c] * p.inv_sqrt_d);
      store_f(dqkv, p.row(b, j) * p.W + p.v_column(kvh) + c, dv[r * ld + c]);
    }
  }
}

// A warp's bf16 operands of dV += Pᵀ·dO and dK += dSᵀ·Q of its 16 keys from
// j0 on against the staged tile of m query rows from q0 on of query head bh:
// the weights over its scores Sᵀ, dSᵀ over its dPᵀ.
__device__ __forceinline__ void tc_dkdv_operands(float* scores, float* dps, const float* lse_s,
                                                 const float* delta_s, const Params& p, int64_t bh,
                                                 int64_t q0, int m, int64_t j0, int lane) {
  const bool dropout = p.dropout > 0.0f;
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
}

// dkdv_kernel on tensor cores: each warp computes Sᵀ and dPᵀ of its 16 keys
// against a tile of queries (keys as rows), so that Pᵀ and dSᵀ are row-major
// operands of dV += Pᵀ·dO and dK += dSᵀ·Q; one block per (key block,
// key/value head kvh) over the query heads kvh, kvh + Hkv, ... in order.
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
  const int64_t b = blockIdx.y / p.Hkv, kvh = blockIdx.y % p.Hkv;
  // The first key blocks are seen by the most queries: they are scheduled first.
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int64_t j0 = k0 + warp * 16;

  const int keys = static_cast<int>(std::min<int64_t>(kRows, p.T - k0));
  tc_load_tile<D>(ks, qkv, p.W, p.k_column(kvh), p, b, k0, keys);
  tc_load_tile<D>(vs, qkv, p.W, p.v_column(kvh), p, b, k0, keys);
  tc_zero<D>(dk, lane);
  tc_zero<D>(dv, lane);
  for (int64_t h = kvh; h < p.H; h += p.Hkv) {
    const int64_t bh = b * p.H + h;
    // Under the causal mask, query rows before k0 see none of these keys.
    for (int64_t q0 = p.causal ? k0 : 0; q0 < p.T; q0 += kTile) {
      const int m = static_cast<int>(std::min<int64_t>(kTile, p.T - q0));
      __syncthreads();
      tc_load_tile<D>(qs, qkv, p.W, h * D, p, b, q0, m);
      tc_load_tile<D>(gs, dout, p.C, h * D, p, b, q0, m);
      load_rows(lse_s, delta_s, lse, delta, p, bh, q0, m);
      __syncthreads();
      tc_product_nt<D>(scores, ks + warp * 16 * S::ld, qs);
      tc_product_nt<D>(dps, vs + warp * 16 * S::ld, gs);
      __syncwarp();
      tc_dkdv_operands(scores, dps, lse_s, delta_s, p, bh, q0, m, j0, lane);
      __syncwarp();
      tc_accumulate<D>(dv, reinterpret_cast<const bf16*>(scores), gs);
      tc_accumulate<D>(dk, reinterpret_cast<const bf16*>(dps), qs);
    }
  }
  __syncwarp();
  tc_store_key_grads<D>(dqkv, dk, dv, p, b, kvh, j0, lane);
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
  const int64_t t0 = q0 + warp * 16, width = p.W;
  const bool dropout = p.dropout > 0.0f;

  const int m = static_cast<int>(std::min<int64_t>(kRows, p.T - q0));
  tc_load_tile<D>(qs, qkv, width, h * D, p, b, q0, m);
  tc_load_tile<D>(gs, dout, p.C, h * D, p, b, q0, m);
  load_rows(lse_s, delta_s, lse, delta, p, bh, q0, m);
  tc_zero<D>(dq, lane);
  const int64_t key_end = p.causal ? std::min<int64_t>(p.T, q0 + kRows) : p.T;
  for (int64_t k0 = 0; k0 < key_end; k0 += kTile) {
    const int n = static_cast<int>(std::min<int64_t>(kTile, key_end - k0));
    __syncthreads();
    tc_load_tile<D>(ks, qkv, width, p.k_column(h), p, b, k0, n);
    tc_load_tile<D>(vs, qkv, width, p.v_column(h), p, b, k0, n);
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

}  // namespace

template <>
void attention_backward<Backend::cuda>(const ExecContext& ec, const Tensor& dout, const Tensor& qkv,
                                       const AttentionSaved& saved, const AttentionConfig& cfg,
                                       Tensor& dqkv, AttentionWorkspace& workspace) {
  const Dims d = check_qkv(qkv, cfg);
  const DType dt = qkv.dtype();
  if (d.B * d.T == 0) return;
  // cuDNN where its forward ran (the logsumexp is the same in both paths, so
  // a shape whose backward cuDNN refuses runs weft's backward below).
  if (saved.kernels != nullptr && std::string_view(saved.kernels) == "cuDNN" &&
      cudnn_attention_takes(d, dt, cfg, {&qkv, &dout, &saved.out, &dqkv}) &&
      cudnn_attention_backward(ec, dout, qkv, saved, d, cfg, dqkv, workspace)) {
    return;
  }

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
      launch(ec, "attention_backward (dK, dV)", dkdv_kernel<T, G, DL>, blocks, d.B * d.Hkv,
             kRows * G, (2 * kTile * d.D + 2 * kTile) * 4, dptr<T>(qkv), dptr<T>(dout),
             dptr<float>(saved.lse), static_cast<const float*>(delta), dptr<T>(dqkv), p);
      launch(ec, "attention_backward (dQ)", dq_kernel<T, G, DL>, blocks, d.B * d.H, kRows * G,
             2 * kTile * d.D * 4, dptr<T>(qkv), dptr<T>(dout), dptr<float>(saved.lse),
             static_cast<const float*>(delta), dptr<T>(dqkv), p);
    });
  });
  if (tc) {
    dispatch_tc_head_dim(d.D, [&]<int D>() {
      launch(ec, "attention_backward (dK, dV)", tc_dkdv_kernel<D>, blocks, d.B * d.Hkv, kTcThreads,
             TcSizes<D>::dkdv, dptr<uint16_t>(qkv), dptr<uint16_t>(dout), dptr<float>(saved.lse),
             static_cast<const float*>(delta), dptr<uint16_t>(dqkv), p);
      launch(ec, "attention_backward (dQ)", tc_dq_kernel<D>, blocks, d.B * d.H, kTcThreads,
             TcSizes<D>::dq, dptr<uint16_t>(qkv), dptr<uint16_t>(dout), dptr<float>(saved.lse),
             static_cast<const float*>(delta), dptr<uint16_t>(dqkv), p);
    });
  }
}

}  // namespace weft::kernels::impl
