// XXH3-64 and the finite scan compiled for AVX2 (this file alone gets the
// -m flags, see CMakeLists.txt); checksum.cpp calls them when the processor
// has AVX2. Only C functions here: nothing that another file could pick up
// compiled for a processor it may not run on.
#if defined(__x86_64__)
#include "weft/train/checksum_kernels.h"

#define XXH_INLINE_ALL
#include <string.h>
#include <xxhash.h>

namespace weft::train::detail {

uint64_t xxh3_avx2(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

void xxh3_update_avx2(void* state, const void* data, size_t bytes) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state), data, bytes);
}

bool any_nonfinite_avx2(const float* v, size_t n) {
  uint32_t any = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    memcpy(&bits, v + i, 4);
    any |= (bits & 0x7f800000u) == 0x7f800000u;
  }
  return any != 0;
}

}  // namespace weft::train::detail
#endif
