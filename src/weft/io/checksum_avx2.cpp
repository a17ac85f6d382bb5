// XXH3-64 and the finite scan compiled for AVX2 (this file alone gets the -m
// flags, see CMakeLists.txt); checksum.cpp calls them when the processor has
// AVX2.
#if defined(__x86_64__)
#include "weft/io/checksum_kernels.h"

#define ISA(name) name##_avx2
#include "weft/io/checksum_isa.inc"
#endif
