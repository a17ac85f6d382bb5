#include <algorithm>
#include <bit>
#include <limits>

#include "weft/core/cuda.h"
#include "weft/kernels/cuda/block_casts.h"
#include "weft/kernels/cuda/common.cuh"
#include "weft/kernels/cuda/fp8.cuh"
#include "weft/kernels/impl/cast.h"

namespace weft::kernels::impl {

// The launch and element helpers of kernels/cuda/ (common.cuh and its kin).
using namespace cuda;

namespace {

constexpr int kThreads = 256;
// Transposes go by tiles of kTile x kTile elements, kTileRows rows of
// threads walking down a tile.
constexpr int kTile = 32;
constexpr int kTileRows = 8;

// ---- kernels -------------------------------------------------------------------

template <typename T>
__global__ void amax_kernel(const T* x, int64_t n, unsigned* amax_bits) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  uint32_t m = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    m = max(m, __float_as_uint(load_f(x, i)) & 0x7fffffffu);
  }
  reduce_abs_bits(m, amax_bits);
}

// codes[i] = encode(x[i] · scale), and the amax of x.
template <typename T, typename F>
__global__ void quantize_rows_kernel(const T* x, int64_t n, float scale, uint8_t* codes,
                                     unsigned* amax_bits) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  uint32_t m = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const float v = load_f(x, i);
    m = max(m, __float_as_uint(v) & 0x7fffffffu);
    codes[i] = encode_scaled<F>(v, scale);
  }
  reduce_abs_bits(m, amax_bits);
}

template <typename F>
__global__ void dequantize_rows_kernel(const uint8_t* codes, int64_t n, float scale, float* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    out[i] = __fmul_rn(F::decode(codes[i]), scale);
  }
}

// What the transposes read and write, as functors (nvcc takes no device
// lambdas without --extended-lambda).
template <typename T>
struct LoadFloat {
  __device__ float operator()(const T* p, int64_t i) const { return load_f(p, i); }
};
template <typename F>
struct Decode {
  float scale;
  __device__ float operator()(const uint8_t* p, int64_t i) const {
    return __fmul_rn(F::decode(p[i]), scale);
  }
};
template <typename F>
struct Encode {
  float scale;
  __device__ uint8_t operator()(float v) const { return encode_scaled<F>(v, scale); }
};
struct Identity {
  __device__ float operator()(float v) const { return v; }
};

// in (rows, cols) -> out (cols, rows): out[c · rows + r] = store(load(in, r · cols + c)),
// through a shared tile so that both the reads and the writes are coalesced.
// blockDim (kTile, kTileRows); blocks walk the tiles.
template <typename In, typename Out, typename Load, typename Store>
__global__ void transpose_kernel(const In* in, int64_t rows, int64_t cols, Out* out, Load load,
                                 Store store) {
  __shared__ float tile[kTile][kTile + 1];  // +1: no bank conflicts down a column
  const int64_t tiles_c = (cols + kTile - 1) / kTile;
  const int64_t tiles = tiles_c * ((rows + kTile - 1) / kTile);
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t r0 = (t / tiles_c) * kTile, c0 = (t % tiles_c) * kTile;
    for (int i = ty; i < kTile; i += kTileRows) {
      const int64_t r = r0 + i, c = c0 + tx;
      if (r < rows && c < cols) tile[i][tx] = load(in, r * cols + c);
    }
    __syncthreads();
    for (int i = ty; i < kTile; i += kTileRows) {
      const int64_t c = c0 + i, r = r0 + tx;
      if (r < rows && c < cols) out[c * rows + r] = store(tile[tx][i]);
    }
    __syncthreads();
  }
}

template <typename In, typename Out, typename Load, typename Store>
void launch_transpose(const ExecContext& ec, const In* in, int64_t rows, int64_t cols, Out* out,
                      Load load, Store store, const char* name) {
  const int64_t tiles = ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
  const auto blocks = static_cast<unsigned>(std::min<int64_t>(tiles, int64_t{1} << 20));
  transpose_kernel<<<blocks, dim3(kTile, kTileRows), 0, stream_of(ec)>>>(in, rows, cols, out, load,
                                                                         store);
  check_launch(name);
}

__global__ void store_kernel(float* p, float value) { *p = value; }

// ---- host side -------------------------------------------------------------------

const char* mode_label(ScalingMode m) {
  switch (m) {
    case ScalingMode::tensor: return "per-tensor";
    case ScalingMode::block_1x32: return "mxfp8 (1x32 block)";
    case ScalingMode::block_1x16: return "nvfp4 (1x16 block)";
    case ScalingMode::block_16x16: return "nvfp4 (16x16 block)";
    case ScalingMode::block_1x128: return "fp8-block (1x128 block)";
    case ScalingMode::block_128x128: return "fp8-block (128x128 block)";
  }
  return "?";
}

[[noreturn]] void no_cuda_mode(ScalingMode m, const char* op) {
  WEFT_FAIL(
      "{}: {} quantization has no CUDA kernel yet; the GPU implements per-tensor, fp8-block "
      "and MXFP8 scaling (e4m3/e5m2) only: use those recipes on the GPU, or run on the CPU",
      op, mode_label(m));
}

void launch_amax(const ExecContext& ec, const Tensor& x, const Tensor& bits) {
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_float(x.dtype(), "amax", [&]<typename T>() {
    amax_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, stream_of(ec)>>>(dptr<const T>(x), n,
                                                                            dptr<unsigned>(bits));
    check_launch("amax_kernel");
  });
}

}  // namespace

template <>
float amax<Backend::cuda>(const ExecContext& ec, const Tensor& x) {
  const Tensor bits = amax_buffer(ec);
  launch_amax(ec, x, bits);
  return read_amax(ec, bits);
}

template <>
void quantize<Backend::cuda>(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                             QuantizedTensor& q) {
  if (cfg.mode == ScalingMode::block_1x128 || cfg.mode == ScalingMode::block_128x128) {
    quantize_block128(ec, x, cfg, q);
    return;
  }
  if (cfg.mode == ScalingMode::block_1x32) {
    quantize_mxfp8(ec, x, cfg, q);
    return;
  }
  if (cfg.mode != ScalingMode::tensor) no_cuda_mode(cfg.mode, "quantize");
  const int64_t cols = x.shape().last(), rows = x.numel() / std::max<int64_t>(cols, 1);
  const int64_t n = rows * cols;
  q.mode = cfg.mode;
  q.dtype = cfg.dtype;
  q.rows = rows;
  q.cols = cols;
  q.tensor_scale_inv = 1.0f / cfg.scale;
  const Tensor bits = amax_buffer(ec);
  if (cfg.rowwise) {
    reuse(ec, q.data, {rows, cols}, cfg.dtype);
    reuse(ec, q.scale_inv, scale_shape(cfg.mode, rows, cols), scale_dtype(cfg.mode));
    store_kernel<<<1, 1, 0, stream_of(ec)>>>(dptr<float>(q.scale_inv), q.tensor_scale_inv);
    check_launch("quantize store_kernel");
    if (n > 0) {
      dispatch_float(x.dtype(), "quantize", [&]<typename T>() {
        dispatch_fp8(cfg.dtype, "quantize", [&]<typename F>() {
          quantize_rows_kernel<T, F><<<blocks_for(n, kThreads), kThreads, 0, stream_of(ec)>>>(
              dptr<const T>(x), n, cfg.scale, dptr<uint8_t>(q.data), dptr<unsigned>(bits));
          check_launch("quantize_rows_kernel");
        });
      });
    }
  } else {
    q.data = Tensor();
    q.scale_inv = Tensor();
    if (cfg.want_amax || cfg.amax_accumulator.defined()) launch_amax(ec, x, bits);
  }
  if (cfg.columnwise) {
    reuse(ec, q.col_data, {cols, rows}, cfg.dtype);
    reuse(ec, q.col_scale_inv, scale_shape(cfg.mode, cols, rows), scale_dtype(cfg.mode));
    store_kernel<<<1, 1, 0, stream_of(ec)>>>(dptr<float>(q.col_scale_inv), q.tensor_scale_inv);
    check_launch("quantize store_kernel");
    if (n > 0) {
      dispatch_float(x.dtype(), "quantize", [&]<typename T>() {
        dispatch_fp8(cfg.dtype, "quantize", [&]<typename F>() {
          launch_transpose(ec, dptr<const T>(x), rows, cols, dptr<uint8_t>(q.col_data),
                           LoadFloat<T>{}, Encode<F>{cfg.scale}, "quantize transpose_kernel");
        });
      });
    }
  } else {
    q.col_data = Tensor();
    q.col_scale_inv = Tensor();
  }
  fold_amax(ec, cfg, bits);
  q.amax = cfg.want_amax ? read_amax(ec, bits) : std::numeric_limits<float>::quiet_NaN();
}

template <>
void dequantize<Backend::cuda>(const ExecContext& ec, const QuantizedTensor& q, bool columnwise,
                               Tensor& out) {
  const Tensor& data = columnwise ? q.col_data : q.data;
  if (q.mode == ScalingMode::block_1x128 || q.mode == ScalingMode::block_128x128) {
    dequantize_block128(ec, q, columnwise, out);
    return;
  }
  if (q.mode == ScalingMode::block_1x32) {
    dequantize_mxfp8(ec, q, columnwise, out);
    return;
  }
  if (q.mode != ScalingMode::tensor) no_cuda_mode(q.mode, "dequantize");
  // kernels::dequantize checked the data against q (the dispatch rule).
  const int64_t n = q.rows * q.cols;
  if (n == 0) return;
  dispatch_fp8(q.dtype, "dequantize", [&]<typename F>() {
    const auto* codes = dptr<const uint8_t>(data);
    if (columnwise) {
      // The copy is (cols, rows): transposed back into x's layout.
      launch_transpose(ec, codes, q.cols, q.rows, dptr<float>(out), Decode<F>{q.tensor_scale_inv},
                       Identity{}, "dequantize transpose_kernel");
    } else {
      dequantize_rows_kernel<F><<<blocks_for(n, kThreads), kThreads, 0, stream_of(ec)>>>(
          codes, n, q.tensor_scale_inv, dptr<float>(out));
      check_launch("dequantize_rows_kernel");
    }
  });
}

}  // namespace weft::kernels::impl
