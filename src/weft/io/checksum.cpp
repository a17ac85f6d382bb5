#include "weft/io/checksum.h"

#include <cstring>

// The header-only form: no library to link, here or in projects that link weft.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "weft/io/checksum_kernels.h"

namespace weft::io {

namespace {

uint64_t xxh3_base(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

void xxh3_update_base(void* state, const void* data, size_t bytes) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state), data, bytes);
}

bool any_nonfinite_base(const float* v, size_t n) {
  uint32_t any = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, v + i, 4);
    any |= (bits & 0x7f800000u) == 0x7f800000u;
  }
  return any != 0;
}

// The widest build the processor runs: on the 2-core AMD EPYC (AVX-512) the
// in-cache hash runs at 52 GB/s with AVX-512, 26 with AVX2, 17 with SSE2, and
// the finite scan at 70, 43 and 16 GB/s.
struct Kernels {
  uint64_t (*hash)(const void*, size_t) = xxh3_base;
  void (*update)(void*, const void*, size_t) = xxh3_update_base;
  bool (*nonfinite)(const float*, size_t) = any_nonfinite_base;
};

Kernels pick() {
  Kernels k;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) {
    k = {detail::xxh3_avx512, detail::xxh3_update_avx512, detail::any_nonfinite_avx512};
  } else if (__builtin_cpu_supports("avx2")) {
    k = {detail::xxh3_avx2, detail::xxh3_update_avx2, detail::any_nonfinite_avx2};
  }
#endif
  return k;
}

const Kernels& kernels() {
  static const Kernels k = pick();
  return k;
}

}  // namespace

uint64_t xxh3(const void* data, size_t bytes) { return kernels().hash(data, bytes); }

bool any_nonfinite(const float* v, size_t n) { return kernels().nonfinite(v, n); }

struct Xxh3Stream::State {
  XXH3_state_t s;
};

Xxh3Stream::Xxh3Stream() : state_(std::make_unique<State>()) { XXH3_64bits_reset(&state_->s); }
Xxh3Stream::~Xxh3Stream() = default;

void Xxh3Stream::update(const void* data, size_t bytes) {
  kernels().update(&state_->s, data, bytes);
}

uint64_t Xxh3Stream::digest() const { return XXH3_64bits_digest(&state_->s); }

std::string checksum_hex(uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = kDigits[v & 15];
  return s;
}

std::optional<uint64_t> checksum_from_hex(std::string_view s) {
  if (s.size() != 16) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    v = v << 4 | static_cast<uint64_t>(d);
  }
  return v;
}

}  // namespace weft::io
