// The passes of the CPU cast kernels (kernels/impl/cast.h), shared by
// kernels/cpu/cast.cpp (amax, quantize, its row-wise pass), cast_columns.cpp
// (the column-wise pass) and cast_dequant.cpp. Each pass runs the vector
// kernels of cast_simd.h where simd() has them, for whole vectors and blocks,
// and the baseline code of cast_blocks.h for the rest and everywhere else.
// Internal to those files and their tests.
#pragma once

#include <cstdint>
#include <vector>

#include "weft/core/quantized.h"
#include "weft/kernels/cast.h"
#include "weft/kernels/cpu/cast_simd.h"
#include "weft/kernels/cpu_support.h"

namespace weft::kernels::cpu {

// The vector kernels the casts run: those of vector_isa() (null: the
// baseline code), unless a ScopedCastIsa says otherwise.
const cast_simd::Kernels* cast_kernels();

// Tests: the casts run `isa`'s kernels (baseline: the baseline code) while
// the guard lives. The processor must run them. Not for concurrent use.
class ScopedCastIsa {
 public:
  explicit ScopedCastIsa(VectorIsa isa);
  ~ScopedCastIsa();
  ScopedCastIsa(const ScopedCastIsa&) = delete;
  ScopedCastIsa& operator=(const ScopedCastIsa&) = delete;

 private:
  int previous_;
};

// What quantizing a segment of a row needs besides the data.
struct SegmentParams {
  ScalingMode mode;
  DType dtype;
  float scale;      // tensor: the encode scale
  float s_enc;      // NVFP4: the per-tensor encode scale S
  float s_dec;      // NVFP4: 1 / S
  bool stochastic;  // e2m1 only
  uint64_t seed;
  const float* enc_scale;       // NVFP4: nvfp4_encode_scale of each scale code
  const cast_simd::Kernels* k;  // the vector kernels, or null
  bool stream = false;          // write the codes past the caches (a large row-wise copy;
                                // each thread calls stream_fence() after its last segment)
};

// Orders this thread's stores past the caches before its later stores (an
// sfence): the row-wise kernels leave that to the end of the pass.
void stream_fence();

// Copies of at least this many bytes of codes are written past the caches
// (non-temporal stores): they would not stay in them.
constexpr int64_t kStreamBytes = int64_t{4} << 20;

// cast_simd's name for an element type.
int simd_format(DType t);

// NVFP4's block decode scale (an e4m3 code) for a block amax, and the encode
// multiplier of a block scale code.
uint8_t nvfp4_block_scale(float block_amax, const SegmentParams& p);
float nvfp4_encode_scale(uint8_t block_scale, const SegmentParams& p);

// Quantizes x[0, n), the elements at columns [c0, c0 + n) of one output row
// (c0 a multiple of the block size), into elements [at, at + n) of the data
// buffer `data` (e2m1: packed, at and n even) and the row's block scales
// `scales` (indexed by block: c0 / block + j; null: not written). 16x16
// tiles, and 1x16 blocks whose scale codes came first, take them from
// `tile_scales` (the same indexing).
// `stream` is the random-stream index of x[0]; consecutive elements follow.
// Returns the bits of the largest |x[i]| (NaN above every number).
uint32_t quantize_segment(const SegmentParams& p, const float* x, int64_t n, int64_t c0,
                          uint8_t* data, int64_t at, uint8_t* scales, const uint8_t* tile_scales,
                          uint64_t stream);

// Row `r` of x as f32: the row itself, or converted into `buf`.
const float* f32_row(const Tensor& x, int64_t r, int64_t cols, std::vector<float>& buf);

// `slot` made (shape, dtype), reusing its buffer when it fits.
void reuse(Tensor& slot, const Shape& shape, DType dtype);

// ---- the column-wise copy (cast_columns.cpp) -----------------------------------

// Where it goes: q.col_data, q.col_scale_inv.
struct ColumnsOut {
  uint8_t* data;
  uint8_t* sc;
  int64_t scale_cols;
  bool stream;  // large enough to be written past the caches
};

// q.col_data and q.col_scale_inv made (16x16: the scales copied from tiles_t).
ColumnsOut prepare_columns(const QuantizeConfig& cfg, const std::vector<uint8_t>& tiles_t,
                           QuantizedTensor& q);

// The share of the vector kernels: bands of `band` rows of x over rows
// [0, nr) and columns [0, nc), the rest by the baseline code (band 0: all).
// Per-tensor scaling with a row-wise copy transposes its codes instead.
struct ColumnPlan {
  int64_t band = 0, nr = 0, nc = 0;
  bool from_codes = false;
};
ColumnPlan plan_columns(const Tensor& x, const QuantizeConfig& cfg, const SegmentParams& p);

// Rows [r0, r0 + n) of the plan's share (r0 a multiple of plan.band).
void column_band(const Tensor& x, const QuantizeConfig& cfg, const SegmentParams& p,
                 const std::vector<uint8_t>& tiles_t, const QuantizedTensor& q, const ColumnsOut& o,
                 const ColumnPlan& plan, int64_t r0, int64_t n);

// What the plan leaves to the baseline code.
void column_rest(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                 const SegmentParams& p, const std::vector<uint8_t>& tiles_t, const ColumnsOut& o,
                 const ColumnPlan& plan);

// The whole column-wise copy, on its own pass over x.
void quantize_columns(const ExecContext& ec, const Tensor& x, const QuantizeConfig& cfg,
                      const SegmentParams& p, const std::vector<uint8_t>& tiles_t,
                      QuantizedTensor& q);

}  // namespace weft::kernels::cpu
