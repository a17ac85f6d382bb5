// The fp8 element formats on the GPU (e4m3, e5m2: encode and decode bit for
// bit as the CPU's), the amax reduction over |x| as bits and its host-side
// word, shared by the CUDA cast kernels (cast.cu, cast_block128.cu).
// Internal to kernels/cuda/; included only by .cu files.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>

#include "weft/core/cuda.h"
#include "weft/kernels/cast.h"
#include "weft/kernels/cuda/common.cuh"

namespace weft::kernels::cuda {

// ---- fp8 element formats -----------------------------------------------------
//
// encode: the CPU's branch-free encoder (cpu/cast_blocks.h encode_one) for
// one element, with branches: round to nearest even, satfinite, NaN keeps its
// sign (0x7f / 0xff). Normal results round the f32 significand with integer
// arithmetic; results below the smallest normal are rounded by one f32
// addition of a power of two whose ulp is the format's subnormal spacing
// (__fadd_rn: never contracted into an FMA, rounded to nearest even).
// decode: the value of a code exactly as core/minifloat.cpp's tables hold it.
template <int Man, int Bias, uint32_t MaxCode, bool HasInf>
struct Fp8 {
  static __device__ __forceinline__ uint8_t encode(float v) {
    constexpr int kEmin = 1 - Bias;
    constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(kEmin + 127) << 23;
    constexpr uint32_t kMagicBits = static_cast<uint32_t>(kEmin - Man + 23 + 127) << 23;
    const uint32_t u = __float_as_uint(v);
    const uint32_t a = u & 0x7fffffffu;
    const uint32_t sign = (u >> 31) << 7;
    if (a > 0x7f800000u) return static_cast<uint8_t>(0x7fu | sign);
    uint32_t code;
    if (a < kMinNormalBits) {
      code =
          __float_as_uint(__fadd_rn(__uint_as_float(a), __uint_as_float(kMagicBits))) - kMagicBits;
    } else {
      const uint32_t sat = a < 0x7f800000u ? a : 0x7f800000u;
      const uint32_t r = sat + ((1u << (22 - Man)) - 1) + ((sat >> (23 - Man)) & 1u);
      code = (r >> (23 - Man)) - (static_cast<uint32_t>(127 - Bias) << Man);
      code = code < MaxCode ? code : MaxCode;
    }
    return static_cast<uint8_t>(code | sign);
  }

  static __device__ __forceinline__ float decode(uint8_t c) {
    const uint32_t sign = static_cast<uint32_t>(c >> 7) << 31;
    const uint32_t mag = c & 0x7fu;
    const uint32_t field = mag >> Man, man = mag & ((1u << Man) - 1);
    constexpr uint32_t kTopField = (1u << (7 - Man)) - 1;
    uint32_t bits;
    if (HasInf ? field == kTopField : mag == 0x7fu) {
      // e5m2: 0x7c is Inf, the codes above it NaN; e4m3: 0x7f is its one NaN.
      bits = HasInf && man == 0 ? 0x7f800000u : 0x7fc00000u;
    } else if (field == 0) {
      // Subnormal: man · 2^(1 - Bias - Man), exact in f32.
      constexpr uint32_t kSpacing = static_cast<uint32_t>(1 - Bias - Man + 127) << 23;
      bits = __float_as_uint(static_cast<float>(man) * __uint_as_float(kSpacing));
    } else {
      bits = ((field - Bias + 127) << 23) | (man << (23 - Man));
    }
    return __uint_as_float(bits | sign);
  }
};

using E4M3 = Fp8<3, 7, 0x7e, false>;
using E5M2 = Fp8<2, 15, 0x7b, true>;

// Calls fn.template operator()<F>() with F the format of `dtype` (e4m3 or e5m2).
template <typename Fn>
void dispatch_fp8(DType dtype, const char* what, Fn&& fn) {
  if (dtype == DType::e4m3) {
    fn.template operator()<E4M3>();
  } else if (dtype == DType::e5m2) {
    fn.template operator()<E5M2>();
  } else {
    WEFT_FAIL("{}: fp8 codes are e4m3 or e5m2, not {}", what, dtype_name(dtype));
  }
}

// encode(v · scale). A NaN is encoded as it is: the GPU's multiply returns
// the canonical NaN (sign dropped), where x86, and so the CPU kernels, keep the
// operand's (seen on an H100: -NaN gave 0x7f here and 0xff on the CPU).
template <typename F>
__device__ __forceinline__ uint8_t encode_scaled(float v, float scale) {
  return F::encode(isnan(v) ? v : __fmul_rn(v, scale));
}

// |x| as f32 bits: an integer maximum ordered as the magnitudes, NaN above
// Inf, reduced over the warp and then over the grid by atomicMax.
__device__ __forceinline__ void reduce_abs_bits(uint32_t m, unsigned* amax_bits) {
  m = __reduce_max_sync(0xffffffffu, m);
  if (threadIdx.x % 32 == 0) atomicMax(amax_bits, m);
}

// A device word for the amax bits, zeroed on the stream.
inline Tensor amax_buffer(const ExecContext& ec) {
  Tensor bits = ec.empty({1}, DType::i32);
  WEFT_CUDA_CHECK(cudaMemsetAsync(bits.raw(), 0, sizeof(unsigned), stream_of(ec)));
  return bits;
}

// The amax those bits stand for (NaN when they are a NaN's), after the
// stream's work.
inline float read_amax(const ExecContext& ec, const Tensor& bits) {
  uint32_t m = 0;
  WEFT_CUDA_CHECK(cudaMemcpyAsync(&m, bits.raw(), sizeof m, cudaMemcpyDeviceToHost, stream_of(ec)));
  weft::cuda::count_host_sync();
  WEFT_CUDA_CHECK(cudaStreamSynchronize(stream_of(ec)));
  return m > 0x7f800000u ? std::numeric_limits<float>::quiet_NaN() : std::bit_cast<float>(m);
}

// A buffer of `shape` on ec's device in `slot`, the one there when it fits
// and nobody else holds it.
inline void reuse(const ExecContext& ec, Tensor& slot, const Shape& shape, DType dtype) {
  if (!slot.defined() || !(slot.shape() == shape) || slot.dtype() != dtype || !slot.sole_owner() ||
      !(slot.device() == ec.device())) {
    slot = ec.empty(shape, dtype);
  }
}

namespace {  // each cast file its own copy (no relocatable device code)
__global__ void fold_amax_kernel(const unsigned* bits, unsigned* slot) {
  const unsigned m = *bits;
  if (m <= 0x7f800000u && m > *slot) *slot = m;
}
}  // namespace

// cfg's amax accumulator (kernels/cast.h) takes the amax in `bits`, on the
// stream: a running max, a NaN dropped.
static inline void fold_amax(const ExecContext& ec, const QuantizeConfig& cfg, const Tensor& bits) {
  if (!cfg.amax_accumulator.defined()) return;
  fold_amax_kernel<<<1, 1, 0, stream_of(ec)>>>(
      dptr<const unsigned>(bits), dptr<unsigned>(cfg.amax_accumulator) + cfg.amax_slot);
  check_launch("fold_amax_kernel");
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks of a grid-stride loop over `items` work items (at least one).
inline unsigned grid_of(int64_t items) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(items, int64_t{1} << 20)));
}

// A block-scaled dequantize: the stored matrix (sr, sc) of codes of format
// F, each times scale(r, c) (its block's decode scale), into out (sr, sc)
// row-wise, or out (sc, sr) for a column-wise copy put back in x's layout
// (through a shared 32x32 tile, blockDim (32, 8)).
template <typename F, typename Scale>
__global__ void block_dequant_rows_kernel(const uint8_t* codes, int64_t sr, int64_t sc, Scale scale,
                                          float* out) {
  const int64_t n = sr * sc, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < n;
       idx += stride) {
    out[idx] = __fmul_rn(F::decode(codes[idx]), scale(idx / sc, idx % sc));
  }
}

template <typename F, typename Scale>
__global__ void block_dequant_cols_kernel(const uint8_t* codes, int64_t sr, int64_t sc, Scale scale,
                                          float* out) {
  __shared__ float tile[32][33];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t tiles_c = (sc + 31) / 32, tiles = tiles_c * ((sr + 31) / 32);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t r0 = (t / tiles_c) * 32, c0 = (t % tiles_c) * 32;
    for (int i = ty; i < 32; i += 8) {
      const int64_t r = r0 + i, c = c0 + tx;
      if (r < sr && c < sc) tile[i][tx] = __fmul_rn(F::decode(codes[r * sc + c]), scale(r, c));
    }
    __syncthreads();
    for (int i = ty; i < 32; i += 8) {
      const int64_t c = c0 + i, r = r0 + tx;
      if (r < sr && c < sc) out[c * sr + r] = tile[tx][i];
    }
    __syncthreads();
  }
}

template <typename F, typename Scale>
void launch_block_dequant(const ExecContext& ec, const uint8_t* codes, int64_t sr, int64_t sc,
                          Scale scale, bool columnwise, float* out) {
  if (columnwise) {
    block_dequant_cols_kernel<F>
        <<<grid_of(ceil_div(sr, 32) * ceil_div(sc, 32)), dim3(32, 8), 0, stream_of(ec)>>>(
            codes, sr, sc, scale, out);
    check_launch("block_dequant_cols_kernel");
  } else {
    block_dequant_rows_kernel<F>
        <<<blocks_for(sr * sc, 256), 256, 0, stream_of(ec)>>>(codes, sr, sc, scale, out);
    check_launch("block_dequant_rows_kernel");
  }
}

// A block-scaled quantize's outputs made ready: q's description (rows and
// cols of x viewed as a matrix, per-tensor decode scale 1) and the copies
// cfg asks for, in their shapes on ec's device, the others dropped.
inline void prepare_block_outputs(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                                  QuantizedTensor& q) {
  const int64_t cols = x.shape().last(), rows = x.numel() / std::max<int64_t>(cols, 1);
  q.mode = cfg.mode;
  q.dtype = cfg.dtype;
  q.rows = rows;
  q.cols = cols;
  q.tensor_scale_inv = 1.0f;
  const DType sd = scale_dtype(cfg.mode);
  if (cfg.rowwise) {
    reuse(ec, q.data, {rows, cols}, cfg.dtype);
    reuse(ec, q.scale_inv, scale_shape(cfg.mode, rows, cols), sd);
  } else {
    q.data = Tensor();
    q.scale_inv = Tensor();
  }
  if (cfg.columnwise) {
    reuse(ec, q.col_data, {cols, rows}, cfg.dtype);
    reuse(ec, q.col_scale_inv, scale_shape(cfg.mode, cols, rows), sd);
  } else {
    q.col_data = Tensor();
    q.col_scale_inv = Tensor();
  }
}

}  // namespace weft::kernels::cuda
