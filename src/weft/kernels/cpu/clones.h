// Row loops compiled for AVX-512 and AVX2 besides the baseline x86-64 the
// library is built for, the processor picking one at load time: the
// element-wise loops that the compiler vectorizes (softmax rows, SwiGLU) run
// several times faster than as SSE2 code. Sanitizer builds
// (WEFT_NO_MULTIVERSIONING) keep the baseline only: target_clones' ifunc
// resolvers run before the sanitizer runtime starts.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(WEFT_NO_MULTIVERSIONING)
#define WEFT_ROW_CLONES [[gnu::target_clones("avx512f", "avx2", "default")]]
#else
#define WEFT_ROW_CLONES
#endif
