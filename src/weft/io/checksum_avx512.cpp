// XXH3-64 and the finite scan compiled for AVX512 (this file alone gets the -m
// flags, see CMakeLists.txt); checksum.cpp calls them when the processor has
// AVX512.
#if defined(__x86_64__)
#include "weft/io/checksum_kernels.h"

#define ISA(name) name##_avx512
#include "weft/io/checksum_isa.inc"
#endif
