// MXFP8's casts on the GPU (ScalingMode::block_1x32, e4m3 / e5m2 codes with
// e8m0 block scales), bit for bit the CPU's (kernels/cpu/cast_blocks.h
// mx_blocks and its column-wise twin):
//
//   the block's shared exponent e = e8m0_round_up(amax / fp8_max) (rounded up
//   unless a power of two; 0 for 0 and small subnormals, 0xfe for Inf, 0xff
//   for NaN), the encode multiplier 2^(127 - e) (1 for e = 0), each element
//   encode(x · multiplier), the decode scale the e8m0 value 2^(e - 127).
//
//   row-wise     one warp per block of 32 along a row, a lane per element.
//   column-wise  a 32 x 32 tile in shared memory; each column's block (32 rows
//                down x) reduced by 8 rows of threads, then written as a row
//                of the copy.
//   dequantize   code value times its block's e8m0 value; the column-wise
//                copy through a shared 32x32 transpose.
//
// One difference of the hardware is covered: a NaN block's multiplier is
// -Inf (e = 0xff), and 0 · -Inf is x86's default NaN (sign set) on the CPU but
// the canonical NaN (sign clear) here: such products take the CPU's sign.
#include <algorithm>

#include "weft/kernels/cuda/block_casts.h"
#include "weft/kernels/cuda/common.cuh"
#include "weft/kernels/cuda/fp8.cuh"

namespace weft::kernels::cuda {

namespace {

constexpr int kB = 32;  // block length
constexpr int kThreads = 256;

__device__ __forceinline__ uint32_t abs_bits(float v) { return __float_as_uint(v) & 0x7fffffffu; }

// e8m0_round_up(amax · inv_max) for the amax whose bits are m (cast_blocks.h
// e8m0_round_up_bits).
__device__ __forceinline__ uint32_t shared_exponent(uint32_t m, float inv_max) {
  const float amax = __uint_as_float(m > 0x7f800000u ? 0x7fc00000u : m);
  const uint32_t u = __float_as_uint(__fmul_rn(amax, inv_max));
  const uint32_t e = u >> 23, mantissa = u & 0x7fffffu;
  const bool inc = mantissa > 0 && e != 0xfeu && !(e == 0 && mantissa <= 0x400000u);
  uint32_t r = e + (inc ? 1u : 0u);
  if (u == 0x7f800000u) r = 0xfeu;
  if (m > 0x7f800000u) r = 0xffu;
  return r;
}

// 2^(127 - e), 1 for e = 0 (e = 0xff gives -Inf, as on the CPU).
__device__ __forceinline__ float encode_multiplier(uint32_t e) {
  return __uint_as_float(e == 0 ? 0x3f800000u : (254u - e) << 23);
}

// The value of an e8m0 code (core/minifloat.cpp's table).
__device__ __forceinline__ float e8m0_value(uint8_t c) {
  if (c == 0xffu) return __uint_as_float(0x7fc00000u);
  if (c == 0) return __uint_as_float(0x00400000u);  // 2^-127
  return __uint_as_float(static_cast<uint32_t>(c) << 23);
}

template <typename F>
__device__ __forceinline__ uint8_t encode_block(float v, float s) {
  if (isnan(v)) return F::encode(v);
  float p = __fmul_rn(v, s);
  if (isnan(p)) p = __uint_as_float(0xffc00000u);  // x86's default NaN
  return F::encode(p);
}

template <typename T, typename F>
__global__ void mx_rows_kernel(const T* x, int64_t rows, int64_t cols, float inv_max,
                               uint8_t* codes, uint8_t* scales, unsigned* amax_bits) {
  const int64_t nb = (cols + kB - 1) / kB;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t per_block = blockDim.x / 32;
  for (int64_t w = blockIdx.x * per_block + threadIdx.x / 32; w < rows * nb;
       w += static_cast<int64_t>(gridDim.x) * per_block) {
    const int64_t r = w / nb, c = (w % nb) * kB + lane;
    const bool in = c < cols;
    const float v = in ? load_f(x, r * cols + c) : 0.0f;
    const uint32_t m = __reduce_max_sync(0xffffffffu, in ? abs_bits(v) : 0u);
    const uint32_t e = shared_exponent(m, inv_max);
    if (in) codes[r * cols + c] = encode_block<F>(v, encode_multiplier(e));
    if (lane == 0) {
      scales[w] = static_cast<uint8_t>(e);
      atomicMax(amax_bits, m);
    }
  }
}

// blockDim (32, 8): a 32-row band by 32 columns at a time.
template <typename T, typename F>
__global__ void mx_cols_kernel(const T* x, int64_t rows, int64_t cols, float inv_max,
                               uint8_t* cdata, uint8_t* cscales, unsigned* amax_bits) {
  __shared__ float tile[kB][33];
  __shared__ uint32_t red[8][32];
  __shared__ float mult[32];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t bands = (rows + kB - 1) / kB, strips = (cols + 31) / 32;
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
    if (ty == 0) {
      for (int k = 1; k < 8; ++k) m = max(m, red[k][tx]);
      const uint32_t e = shared_exponent(m, inv_max);
      if (c < cols) cscales[c * bands + band] = static_cast<uint8_t>(e);
      mult[tx] = encode_multiplier(e);
      const uint32_t wm = __reduce_max_sync(0xffffffffu, m);
      if (tx == 0) atomicMax(amax_bits, wm);
    }
    __syncthreads();
    for (int i = ty; i < 32; i += 8) {
      const int64_t cc = c0 + i;
      if (cc < cols && tx < nr) {
        cdata[cc * rows + r0 + tx] = encode_block<F>(tile[tx][i], mult[i]);
      }
    }
    __syncthreads();
  }
}

// MXFP8's decode scale of element (r, c): the e8m0 value of its 1x32 block.
struct E8m0Scale {
  const uint8_t* s;
  int64_t ns;
  __device__ float operator()(int64_t r, int64_t c) const { return e8m0_value(s[r * ns + c / kB]); }
};

}  // namespace

void quantize_mxfp8(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                    QuantizedTensor& q) {
  const int64_t cols = x.shape().last(), rows = x.numel() / std::max<int64_t>(cols, 1);
  const float inv_max = 1.0f / dtype_max(cfg.dtype);
  prepare_block_outputs(ec, x, cfg, q);
  const Tensor bits = amax_buffer(ec);
  if (rows * cols > 0) {
    const cudaStream_t st = stream_of(ec);
    dispatch_float(x.dtype(), "quantize", [&]<typename T>() {
      dispatch_fp8(cfg.dtype, "quantize", [&]<typename F>() {
        if (cfg.rowwise) {
          const int64_t warps = rows * ceil_div(cols, kB);
          mx_rows_kernel<T, F><<<grid_of(ceil_div(warps, kThreads / 32)), kThreads, 0, st>>>(
              dptr<const T>(x), rows, cols, inv_max, dptr<uint8_t>(q.data),
              dptr<uint8_t>(q.scale_inv), dptr<unsigned>(bits));
          check_launch("mxfp8 mx_rows_kernel");
        }
        if (cfg.columnwise) {
          const int64_t tiles = ceil_div(rows, kB) * ceil_div(cols, 32);
          mx_cols_kernel<T, F><<<grid_of(tiles), dim3(32, 8), 0, st>>>(
              dptr<const T>(x), rows, cols, inv_max, dptr<uint8_t>(q.col_data),
              dptr<uint8_t>(q.col_scale_inv), dptr<unsigned>(bits));
          check_launch("mxfp8 mx_cols_kernel");
        }
      });
    });
  }
  fold_amax(ec, cfg, bits);
  q.amax = cfg.want_amax ? read_amax(ec, bits) : std::numeric_limits<float>::quiet_NaN();
}

void dequantize_mxfp8(const ExecContext& ec, const QuantizedTensor& q, bool columnwise,
                      Tensor& out) {
  const Tensor& data = columnwise ? q.col_data : q.data;
  const Tensor& sc = columnwise ? q.col_scale_inv : q.scale_inv;
  const int64_t sr = columnwise ? q.cols : q.rows, scols = columnwise ? q.rows : q.cols;
  const int64_t ns = ceil_div(scols, kB);
  // kernels::dequantize checked the data and scales against q (the dispatch rule).
  const int64_t n = sr * scols;
  if (n == 0) return;
  dispatch_fp8(q.dtype, "dequantize", [&]<typename F>() {
    launch_block_dequant<F>(ec, dptr<const uint8_t>(data), sr, scols,
                            E8m0Scale{dptr<const uint8_t>(sc), ns}, columnwise, dptr<float>(out));
  });
}

}  // namespace weft::kernels::cuda
