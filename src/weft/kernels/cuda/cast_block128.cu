// fp8-block's casts on the GPU, bit for bit the CPU's
// (kernels/cpu/cast_block128.cpp): every element is encode(x · s) with its
// block's power-of-two encode scale s = kernels::fp8_block_scale(amax).
//
//   row-wise 1x128     one warp per block of a row (4 elements a lane): the
//                      warp's max of |x| as bits, the scale, the codes.
//   column-wise        a 128-row x 32-column tile of x in shared memory; the
//                      column maxima by 8 rows of threads, then each column
//                      written as a row of the copy (coalesced bytes).
//   128x128 tiles      one thread block per tile reduces its amax first and
//                      writes both copies' decode scales; the row and column
//                      passes then encode with the tile's scale.
//   dequantize         code value times its block's decode scale; the
//                      column-wise copy through a shared 32x32 transpose.
#include <algorithm>
#include <cfloat>

#include "weft/kernels/cuda/block_casts.h"
#include "weft/kernels/cuda/common.cuh"
#include "weft/kernels/cuda/fp8.cuh"

namespace weft::kernels::cuda {

namespace {

constexpr int kB = 128;  // block length
constexpr int kThreads = 256;

// kernels::fp8_block_scale for the amax whose bits are m (NaN above Inf).
__device__ __forceinline__ float block_scale(uint32_t m, float fmax) {
  if (m == 0u || m >= 0x7f800000u) return 1.0f;  // 0, Inf, NaN
  float s = __fdiv_rn(fmax, __uint_as_float(m));
  if (s > FLT_MAX) s = FLT_MAX;
  return __uint_as_float(__float_as_uint(s) & 0xff800000u);
}

__device__ __forceinline__ uint32_t abs_bits(float v) { return __float_as_uint(v) & 0x7fffffffu; }

// Row-wise: one warp per (row, block); tile_enc (128x128: the tiles' encode
// scales) or null (1x128: each block's own, its decode scale written to
// scale_inv and its amax folded into amax_bits).
template <typename T, typename F>
__global__ void rows_kernel(const T* x, int64_t rows, int64_t cols, float fmax,
                            const float* tile_enc, uint8_t* codes, float* scale_inv,
                            unsigned* amax_bits) {
  const int64_t nb = (cols + kB - 1) / kB;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t per_block = blockDim.x / 32;
  const int64_t total = rows * nb;
  for (int64_t w = blockIdx.x * per_block + threadIdx.x / 32; w < total;
       w += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t r = w / nb, b = w % nb, c0 = b * kB;
    const int n = static_cast<int>(min(static_cast<int64_t>(kB), cols - c0));
    const T* row = x + r * cols + c0;
    float v[4];
    uint32_t m = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int i = lane + 32 * k;
      v[k] = i < n ? load_f(row, i) : 0.0f;
      if (i < n) m = max(m, abs_bits(v[k]));
    }
    m = __reduce_max_sync(0xffffffffu, m);
    float s = 0.0f;
    if (tile_enc != nullptr) {
      s = tile_enc[(r / kB) * nb + b];
    } else {
      s = block_scale(m, fmax);
      if (lane == 0) {
        scale_inv[r * nb + b] = __fdiv_rn(1.0f, s);
        atomicMax(amax_bits, m);
      }
    }
    uint8_t* out = codes + r * cols + c0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int i = lane + 32 * k;
      if (i < n) out[i] = encode_scaled<F>(v[k], s);
    }
  }
}

// Column-wise: blockDim (32, 8); a tile of 128 rows and 32 columns at a time.
template <typename T, typename F>
__global__ void cols_kernel(const T* x, int64_t rows, int64_t cols, float fmax,
                            const float* tile_enc, uint8_t* cdata, float* cscale_inv,
                            unsigned* amax_bits) {
  __shared__ float tile[kB][33];
  __shared__ uint32_t red[8][32];
  __shared__ float scale[32];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t bands = (rows + kB - 1) / kB, strips = (cols + 31) / 32;
  const int64_t tc = (cols + kB - 1) / kB;
  for (int64_t t = blockIdx.x; t < bands * strips; t += gridDim.x) {
    const int64_t band = t / strips, r0 = band * kB, c0 = (t % strips) * 32;
    const int nr = static_cast<int>(min(static_cast<int64_t>(kB), rows - r0));
    const int64_t c = c0 + tx;
    uint32_t m = 0;
    for (int i = ty; i < kB; i += 8) {
      float v = 0.0f;
      if (i < nr && c < cols) {
        v = load_f(x, (r0 + i) * cols + c);
        m = max(m, abs_bits(v));
      }
      tile[i][tx] = v;
    }
    red[ty][tx] = m;
    __syncthreads();
    if (ty == 0) {  // one warp: a column each
      for (int k = 1; k < 8; ++k) m = max(m, red[k][tx]);
      float s = 1.0f;
      if (tile_enc != nullptr) {
        if (c < cols) s = tile_enc[band * tc + c / kB];
      } else {
        s = block_scale(m, fmax);
        if (c < cols) cscale_inv[c * bands + band] = __fdiv_rn(1.0f, s);
        const uint32_t wm = __reduce_max_sync(0xffffffffu, m);
        if (tx == 0) atomicMax(amax_bits, wm);
      }
      scale[tx] = s;
    }
    __syncthreads();
    for (int i = ty; i < 32; i += 8) {
      const int64_t cc = c0 + i;
      if (cc >= cols) continue;
      uint8_t* out = cdata + cc * rows + r0;
      for (int j = tx; j < nr; j += 32) out[j] = encode_scaled<F>(tile[j][i], scale[i]);
    }
    __syncthreads();
  }
}

// 128x128 tiles: one thread block per tile; the tile's encode scale to
// tile_enc, its decode scale to scale_inv (row-wise layout) and cscale_inv
// (the transposed layout) where they are not null.
template <typename T>
__global__ void tiles_kernel(const T* x, int64_t rows, int64_t cols, float fmax, float* tile_enc,
                             float* scale_inv, float* cscale_inv, unsigned* amax_bits) {
  __shared__ uint32_t red[32];
  const int64_t tr = (rows + kB - 1) / kB, tc = (cols + kB - 1) / kB;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  for (int64_t t = blockIdx.x; t < tr * tc; t += gridDim.x) {
    const int64_t a = t / tc, b = t % tc, r0 = a * kB, c0 = b * kB;
    const int nr = static_cast<int>(min(static_cast<int64_t>(kB), rows - r0));
    const int nc = static_cast<int>(min(static_cast<int64_t>(kB), cols - c0));
    uint32_t m = 0;
    for (int idx = static_cast<int>(threadIdx.x); idx < kB * kB; idx += blockDim.x) {
      const int i = idx / kB, j = idx % kB;
      if (i < nr && j < nc) m = max(m, abs_bits(load_f(x, (r0 + i) * cols + c0 + j)));
    }
    m = __reduce_max_sync(0xffffffffu, m);
    if (lane == 0) red[warp] = m;
    __syncthreads();
    if (warp == 0) {
      uint32_t v = lane < static_cast<int>(blockDim.x / 32) ? red[lane] : 0u;
      v = __reduce_max_sync(0xffffffffu, v);
      if (lane == 0) {
        const float s = block_scale(v, fmax);
        const float inv = __fdiv_rn(1.0f, s);
        tile_enc[t] = s;
        if (scale_inv != nullptr) scale_inv[a * tc + b] = inv;
        if (cscale_inv != nullptr) cscale_inv[b * tr + a] = inv;
        atomicMax(amax_bits, v);
      }
    }
    __syncthreads();
  }
}

// fp8-block's decode scale of element (r, c): f32 per block of br x 128.
struct Block128Scale {
  const float* s;
  int64_t br, ns;
  __device__ float operator()(int64_t r, int64_t c) const { return s[(r / br) * ns + c / kB]; }
};

}  // namespace

void quantize_block128(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                       QuantizedTensor& q) {
  const int64_t cols = x.shape().last(), rows = x.numel() / std::max<int64_t>(cols, 1);
  const int64_t n = rows * cols;
  const bool tiled = cfg.mode == ScalingMode::block_128x128;
  const float fmax = dtype_max(cfg.dtype);
  prepare_block_outputs(ec, x, cfg, q);
  const Tensor bits = amax_buffer(ec);
  if (n > 0) {
    const cudaStream_t st = stream_of(ec);
    Tensor tile_enc;
    dispatch_float(x.dtype(), "quantize", [&]<typename T>() {
      if (tiled) {
        const int64_t tiles = ceil_div(rows, kB) * ceil_div(cols, kB);
        tile_enc = ec.empty({tiles}, DType::f32);
        tiles_kernel<T><<<grid_of(tiles), kThreads, 0, st>>>(
            dptr<const T>(x), rows, cols, fmax, dptr<float>(tile_enc),
            cfg.rowwise ? dptr<float>(q.scale_inv) : nullptr,
            cfg.columnwise ? dptr<float>(q.col_scale_inv) : nullptr, dptr<unsigned>(bits));
        check_launch("fp8-block tiles_kernel");
      }
      const float* enc = tiled ? dptr<const float>(tile_enc) : nullptr;
      dispatch_fp8(cfg.dtype, "quantize", [&]<typename F>() {
        if (cfg.rowwise) {
          const int64_t warps = rows * ceil_div(cols, kB);
          rows_kernel<T, F><<<grid_of(ceil_div(warps, kThreads / 32)), kThreads, 0, st>>>(
              dptr<const T>(x), rows, cols, fmax, enc, dptr<uint8_t>(q.data),
              dptr<float>(q.scale_inv), dptr<unsigned>(bits));
          check_launch("fp8-block rows_kernel");
        }
        if (cfg.columnwise) {
          const int64_t tiles = ceil_div(rows, kB) * ceil_div(cols, 32);
          cols_kernel<T, F><<<grid_of(tiles), dim3(32, 8), 0, st>>>(
              dptr<const T>(x), rows, cols, fmax, enc, dptr<uint8_t>(q.col_data),
              dptr<float>(q.col_scale_inv), dptr<unsigned>(bits));
          check_launch("fp8-block cols_kernel");
        }
      });
    });
  }
  fold_amax(ec, cfg, bits);
  q.amax = cfg.want_amax ? read_amax(ec, bits) : std::numeric_limits<float>::quiet_NaN();
}

void dequantize_block128(const ExecContext& ec, const QuantizedTensor& q, bool columnwise,
                         Tensor& out) {
  const Tensor& data = columnwise ? q.col_data : q.data;
  const Tensor& sc = columnwise ? q.col_scale_inv : q.scale_inv;
  const int64_t sr = columnwise ? q.cols : q.rows, scols = columnwise ? q.rows : q.cols;
  const int64_t br = scaling_block_rows(q.mode);
  // kernels::dequantize checked the data and scales against q (the dispatch rule).
  const int64_t n = sr * scols;
  if (n == 0) return;
  const int64_t ns = ceil_div(scols, kB);
  dispatch_fp8(q.dtype, "dequantize", [&]<typename F>() {
    launch_block_dequant<F>(ec, dptr<const uint8_t>(data), sr, scols,
                            Block128Scale{dptr<const float>(sc), br, ns}, columnwise,
                            dptr<float>(out));
  });
}

}  // namespace weft::kernels::cuda
