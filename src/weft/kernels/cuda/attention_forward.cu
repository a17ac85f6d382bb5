// The forward kernels of the fused attention (kernels/impl/attention.h) and its
// dropout mask.
#include "weft/kernels/cuda/attention_common.cuh"
#include "weft/kernels/cuda/attention_cudnn.h"
#include "weft/kernels/impl/attention.h"

namespace weft::kernels::impl {

// The launch and element helpers of kernels/cuda/ (common.cuh and its kin).
using namespace cuda;

namespace {

// Row t's scores against the n keys of a tile, masked, into srow (written by
// the row's first thread); returns their maximum.
template <int G, int DL>
__device__ __forceinline__ float row_scores(const float (&q)[DL], const float* ks, float* srow,
                                            int n, int g, int64_t t, int64_t k0, const Params& p) {
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
  return tile_max;
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
  const int64_t t = q0 + r, width = p.W;
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
    load_tile(ks, qkv, width, p.k_column(h), p, b, k0, n);
    load_tile(vs, qkv, width, p.v_column(h), p, b, k0, n);
    __syncthreads();

    const float tile_max = row_scores<G, DL>(q, ks, srow, n, g, t, k0, p);
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

// The output and lse of a warp's 16 query rows from t0 on, from their f32
// accumulators (row stride D + 4) and row statistics.
template <int D>
__device__ __forceinline__ void tc_store_rows(uint16_t* out, float* lse, const float* acc,
                                              const float (&max)[16], const float (&sum)[16],
                                              const Params& p, int64_t bh, int64_t t0, int lane) {
  const int64_t b = bh / p.H, h = bh % p.H;
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const int64_t t = t0 + r;
    if (t >= p.T) break;
    const float inv = 1.0f / sum[r];
    for (int c = lane; c < D; c += 32) {
      store_f(out, p.row(b, t) * p.C + h * D + c, acc[r * TcSizes<D>::acc_ld + c] * inv);
    }
    if (lane == 0) lse[bh * p.T + t] = max[r] + logf(sum[r]);
  }
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
  const int64_t t0 = q0 + warp * 16, width = p.W;
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
    tc_load_tile<D>(ks, qkv, width, p.k_column(h), p, b, k0, n);
    tc_load_tile<D>(vs, qkv, width, p.v_column(h), p, b, k0, n);
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
  tc_store_rows<D>(out, lse, acc, max, sum, p, bh, t0, lane);
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

}  // namespace

template <>
void attention_forward<Backend::cuda>(const ExecContext& ec, const Tensor& qkv,
                                      const AttentionConfig& cfg, Tensor& out,
                                      AttentionSaved& saved, AttentionWorkspace& workspace) {
  const Dims d = check_qkv(qkv, cfg);
  const DType dt = qkv.dtype();
  ensure(ec, saved.lse, {d.B, d.H, d.T}, DType::f32);
  saved.out = out;
  saved.kernels = tensor_cores(dt, d.D) ? "tensor cores" : "CUDA cores";
  if (d.B * d.T == 0) return;
  if (cudnn_attention_takes(d, dt, cfg, {&qkv, &out}) &&
      cudnn_attention_forward(ec, qkv, d, cfg, out, saved.lse, workspace)) {
    saved.kernels = "cuDNN";
    return;
  }
  const Params p = make_params(d, cfg);
  const int64_t blocks = (d.T + kRows - 1) / kRows;
  if (tensor_cores(d, dt, {&qkv})) {
    saved.kernels = "tensor cores";
    dispatch_tc_head_dim(d.D, [&]<int D>() {
      launch(ec, "attention_forward", tc_forward_kernel<D>, blocks, d.B * d.H, kTcThreads,
             TcSizes<D>::forward, dptr<uint16_t>(qkv), dptr<uint16_t>(out), dptr<float>(saved.lse),
             p);
    });
    return;
  }
  saved.kernels = "CUDA cores";
  dispatch_float(dt, "attention_forward", [&]<typename T>() {
    dispatch_head_dim(d.D, [&]<int G, int DL>() {
      launch(ec, "attention_forward", forward_kernel<T, G, DL>, blocks, d.B * d.H, kRows * G,
             (2 * kTile * d.D + kRows * (kTile + 1)) * 4, dptr<T>(qkv), dptr<T>(out),
             dptr<float>(saved.lse), p);
    });
  });
}

template <>
const char* attention_path<Backend::cuda>(DType dtype, int64_t head_dim,
                                          const AttentionConfig& cfg) {
  // The dimensions that decide: a head of head_dim, multi-head unless cfg says.
  const int64_t heads = std::max<int64_t>(cfg.heads, 1);
  const int64_t kv = cfg.kv_heads == 0 ? heads : cfg.kv_heads;
  const Dims d{1, 1, heads * head_dim, heads, head_dim, kv, cfg.sequence_major};
  if (cudnn_attention_takes(d, dtype, cfg, {})) return "cuDNN";
  return tensor_cores(dtype, head_dim) ? "tensor cores" : "CUDA cores";
}

template <>
std::string attention_cudnn_status<Backend::cuda>() {
  return cudnn_attention_status();
}

template <>
Tensor attention_dropout_mask<Backend::cuda>(const ExecContext& ec, const AttentionConfig& cfg,
                                             int64_t batch, int64_t seq) {
  if (cfg.dropout <= 0.0f) return Tensor();
  Tensor mask = ec.empty({batch, cfg.heads, seq, seq}, DType::u8);
  const int64_t n = mask.numel();
  if (n == 0) return mask;
  // The mask is over query heads whatever the key/value heads: Hkv = H here.
  const Params p = make_params({batch, seq, cfg.heads, cfg.heads, 1, cfg.heads, false}, cfg);
  constexpr int kThreads = 256;
  dropout_mask_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream_of(ec)>>>(dptr<uint8_t>(mask),
                                                                               p);
  check_launch("attention_dropout_mask");
  return mask;
}

}  // namespace weft::kernels::impl
