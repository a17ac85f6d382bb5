#include "weft/kernels/cpu/onednn.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <vector>

#include "weft/core/error.h"
#include "weft/kernels/cpu/clones.h"
#include "weft/kernels/cpu_support.h"

namespace weft::kernels::cpu {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

int apply_thread_budget(const ExecContext& ec) {
  // Called from inside a kernel's own parallel region (fused attention runs
  // its block products on each thread of its team), oneDNN runs on the calling
  // thread alone; the team size is left as it is, so that `applied` keeps
  // matching what the thread's calls outside any region see.
  if (omp_in_parallel()) return 1;
  thread_local int applied = 0;
  const int n = ec.threads();
  if (n != applied) {
    omp_set_num_threads(n);
    applied = n;
  }
  return n;
}

dnnl::memory::data_type to_dnnl(DType t) {
  switch (t) {
    case DType::f32: return dnnl::memory::data_type::f32;
    case DType::bf16: return dnnl::memory::data_type::bf16;
    case DType::f16: return dnnl::memory::data_type::f16;
    case DType::i32: return dnnl::memory::data_type::s32;
    case DType::u8: return dnnl::memory::data_type::u8;
    default: WEFT_FAIL("oneDNN has no {} data type", dtype_name(t));
  }
}

bool emulate_bf16() { return !cpu_support().native_bf16; }

float* staging(int slot, int64_t n) {
  thread_local std::array<std::vector<float>, 4> buffers;
  auto& b = buffers.at(static_cast<size_t>(slot));
  if (static_cast<int64_t>(b.size()) < n) b.resize(static_cast<size_t>(n));
  return b.data();
}

void widen_bf16(const ExecContext& ec, const uint16_t* src, float* dst, int64_t n) {
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

namespace {

// f32_to_bf16 without its branch (both results computed, one kept), so that
// the loop below vectorizes: bit for bit the same value.
inline uint16_t narrow_one(float f) {
  const uint32_t u = f32_to_bits(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

WEFT_ROW_CLONES void narrow_run(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = narrow_one(src[i]);
}

// Elements per parallel task of the conversions.
constexpr int64_t kConvertChunk = int64_t{1} << 15;

}  // namespace

void narrow_to_bf16(const ExecContext& ec, const float* src, uint16_t* dst, int64_t n) {
  const int64_t chunks = (n + kConvertChunk - 1) / kConvertChunk;
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t at = c * kConvertChunk;
    narrow_run(src + at, dst + at, std::min(kConvertChunk, n - at));
  }
}

}  // namespace weft::kernels::cpu
