// The processor-specific builds of the checksum and finite-scan loops
// (checksum_avx2.cpp, checksum_avx512.cpp), chosen at run time by
// checksum.cpp (not with ifunc resolvers, which sanitizer builds cannot run).
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace weft::io::detail {

// `state` is an XXH3_state_t.
uint64_t xxh3_avx2(const void* data, size_t bytes);
void xxh3_update_avx2(void* state, const void* data, size_t bytes);
bool any_nonfinite_avx2(const float* v, size_t n);
uint64_t xxh3_avx512(const void* data, size_t bytes);
void xxh3_update_avx512(void* state, const void* data, size_t bytes);
bool any_nonfinite_avx512(const float* v, size_t n);

}  // namespace weft::io::detail
