// The hand-vectorized cast kernels (kernels/cpu/cast_avx2.cpp and
// cast_avx512.cpp, each compiled with its own -m flags from one body,
// cast_simd.inc), chosen at run time by kernels/cpu/cast.cpp the way
// io/checksum.cpp picks its builds: no ifunc resolvers, so sanitizer builds
// run them too, and a cap (WEFT_MAX_CPU_ISA, kernels/cpu_support.h) forces
// the narrower ones on any machine.
//
// Each kernel covers whole groups of 16 elements (whole blocks, whole 16-column
// strips) and returns or writes bit for bit what the baseline code of
// cast_blocks.h does for them; cast.cpp keeps that code for ragged tails and
// as the path of processors without AVX2. Plain declarations only: nothing
// here may be compiled for one processor and picked up by another file.
#pragma once

#include <stdint.h>

namespace weft::kernels::cpu::cast_simd {

// Element formats, as the kernels' `fmt` arguments.
enum Fmt : int { kE4M3 = 0, kE5M2 = 1, kE2M1 = 2 };

// The random stream of stochastic rounding (kernels/random.h): element
// `offset` is the first element's.
struct RandomStream {
  uint64_t seed;
  uint64_t offset;
};

// A band of rows of x for the column-wise encoders.
struct ColumnBand {
  const float* x;  // element (r0, 0) of x
  int64_t ld;      // x's row length
  int64_t nr;      // rows: at most 64 (fp8) or 128 (e2m1), a multiple of 16 and the block
  int64_t nc;      // columns, a multiple of 16
  uint8_t* cd;     // the byte of element (0, r0) of the column-wise copy
  int64_t ldc;     // bytes from one of its rows to the next
  uint8_t* cs;     // the scale of (0, r0)'s block in its scales (null where none are written)
  int64_t lds;     // scales from one of its rows to the next
  bool stream;     // write the codes past the caches (a copy too large to stay in them)
  // MXFP8 (and fp8-block) with a row-wise copy already made for the band
  // (null: none): its codes and e8m0 scales (exponent bytes) at element
  // (r0, 0), rows ldr and ldrs apart.
  const uint8_t* rc = nullptr;
  int64_t ldr = 0;
  const uint8_t* rs = nullptr;
  int64_t ldrs = 0;
};

struct Kernels {
  const char* isa;  // "avx2", "avx512"

  // ---- row-wise encoders (n a multiple of 16, blocks whole) -----------------
  // Each returns the largest |x| among its inputs as f32 bits (NaN above Inf).
  // `stream`: write the codes past the caches (a copy too large to stay in
  // them) — with no fence: the caller's, once its pass is done.

  uint32_t (*abs_max)(const float* x, int64_t n);
  // m[b] = the largest |x| of block b over blocks of 16 (as bits), or the
  // larger of that and m[b] where `accumulate`. Returns the largest m[b].
  uint32_t (*block_amax)(const float* x, int64_t blocks, uint32_t* m, bool accumulate);
  // block_max[b] = the largest |x| of block b over `blocks` blocks of `block`
  // elements (a multiple of 16), as bits, and col_max[i] = the larger of
  // col_max[i] and |x[i]| (fp8-block's rows and the amaxes of the column-wise
  // blocks, one read of the row).
  void (*block_col_amax)(const float* x, int64_t blocks, int64_t block, uint32_t* block_max,
                         uint32_t* col_max);
  // out[i] = encode(x[i] · s), fp8 (fmt e4m3 or e5m2).
  uint32_t (*encode_tensor)(int fmt, const float* x, float s, int64_t n, uint8_t* out, bool stream);
  // The same codes where every |x[i] · s| is at most the format's largest
  // value or rounds down to it (no NaN, no Inf): fp8-block's blocks whose
  // amax is finite, under their scale (at most fmax / amax but for that
  // quotient's rounding). No amax.
  void (*encode_bounded)(int fmt, const float* x, float s, int64_t n, uint8_t* out, bool stream);
  // MXFP8 blocks of 32: e8m0 scales[b], codes one a byte (cast_blocks.h mx_blocks).
  uint32_t (*mx_blocks)(int fmt, const float* x, int64_t blocks, float inv_max, uint8_t* codes,
                        uint8_t* scales, bool stream);
  // NVFP4 blocks of 16 (cast_blocks.h nv_blocks), the e2m1 codes packed two a
  // byte into `packed`. The blocks' scale codes: tile_scales where given
  // (16x16 tiles, 1x16 blocks whose codes came first), else computed from
  // their amaxes and written to scales unless it is null. When tile_scales
  // is given, x's amax is not computed and 0 is returned. random: stochastic
  // rounding on that stream (null: round to nearest even).
  uint32_t (*nv_blocks)(const float* x, int64_t blocks, float s_enc, const float* enc_scale,
                        const uint8_t* tile_scales, const RandomStream* random, uint8_t* packed,
                        uint8_t* scales, bool stream);
  // codes[i] = NVFP4's scale code of a block whose largest magnitude is m[i]
  // (as bits): e4m3(amax / 6 · s_enc) (cast_blocks.h nv_scale_codes; any n).
  void (*nv_scale_codes)(const uint32_t* m, int64_t n, float s_enc, uint8_t* codes);
  // u[i] = uniform_at(seed, stream, i) for i < n (any n): the uniforms of
  // nv_blocks' stochastic rounding.
  void (*uniforms)(uint64_t seed, uint64_t stream, int64_t n, float* u);

  // ---- column-wise encoders: a band of rows of x -----------------------------
  // The band's codes go to the column-wise copy (its rows are x's columns).

  void (*tensor_cols)(int fmt, const ColumnBand& band, float s);
  // The same with one scale per column of x: codes encode(x(r, c) · col_scale[c])
  // (col_scale indexed from the band's column 0; fp8-block's column blocks).
  // col_exp (null: none): with the band's row-wise codes made (band.rc, ldr),
  // the exponent bytes of the column scales (col_exp[c]) and of the row-wise
  // scales (band.rs, ldrs: one per 128 columns of each row), 2^(127 - e) for
  // a block whose amax is finite and positive, 0xff (scale 1) for one whose
  // amax is 0, Inf or NaN: most codes are then the row-wise ones moved by
  // binades (cast_simd_tiles.inc tensor_cols_t).
  void (*scaled_cols)(int fmt, const ColumnBand& band, const float* col_scale,
                      const uint8_t* col_exp);
  void (*mx_cols)(int fmt, const ColumnBand& band, float inv_max);
  // tile_scales: the 16x16 tiles' scale codes of column 0's tiles down the
  // band (one per 16 rows), tile_ld apart from one 16 columns to the next;
  // else null and the scales are computed and written to band.cs.
  void (*nv_cols)(const ColumnBand& band, float s_enc, const float* enc_scale,
                  const uint8_t* tile_scales, int64_t tile_ld);
  // dst (cols, rows) = src (rows, cols)ᵀ, bytes, dst's rows ldd apart
  // (written past the caches where `stream`).
  void (*transpose_bytes)(const uint8_t* src, int64_t rows, int64_t cols, uint8_t* dst, int64_t ldd,
                          bool stream);

  // ---- decoders ----------------------------------------------------------------
  // out[i] = value(code i) · t (n a multiple of 16; e2m1 packed).
  void (*dequant_tensor)(int fmt, const uint8_t* d, float t, int64_t n, float* out);
  // Whole blocks of bc (16 or 32) elements of a row-wise copy: out[i] =
  // value(code i) · block_scale[srow[block]] · second. d points at the row's
  // first code (for e2m1 at its byte, the row starting at an even element).
  void (*dequant_blocks)(int fmt, int bc, const uint8_t* d, const float* block_scale,
                         const uint8_t* srow, float second, int64_t blocks, float* out);
  // The column-wise copy put back in x's layout, a strip of 16 of its rows
  // (x's columns j0 .. j0 + 15) and ni of its columns (x's rows, a multiple
  // of 16 and of the block length): out (i, j) = value(cd (j, i)) ·
  // scale(j, i / bc) · second, out pointing at (i0, j0), ldo floats apart; cd
  // at the byte of element (j0, i0), ldc bytes apart; scale(j, b) =
  // block_scale[cs[j · lds + b]] (tensor mode: cs null, scale 1, bc 16).
  void (*dequant_cols)(int fmt, int bc, const uint8_t* cd, int64_t ldc, const float* block_scale,
                       const uint8_t* cs, int64_t lds, float second, int64_t ni, float* out,
                       int64_t ldo);
};

// The builds of this processor's architecture (null elsewhere).
const Kernels* avx2_kernels();
const Kernels* avx512_kernels();

}  // namespace weft::kernels::cpu::cast_simd
