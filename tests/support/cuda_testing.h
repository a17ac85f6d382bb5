// What the CUDA tests share: a skip with the reason where no GPU is usable,
// and the pattern every CUDA kernel test follows: run the kernel on the CPU
// and on the GPU from the same inputs and compare (the CPU kernel is the
// reference, itself tested against fp64 and finite differences).
//
// Test suites of CUDA code are named Cuda* so that `--gtest_filter='Cuda*'`
// runs exactly them (scripts/gpu-check.sh).
#pragma once

#include <gtest/gtest.h>

#include "weft/core/cuda.h"
#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::testing {

// Skips the calling test, saying why, where this build or machine has no GPU.
#define WEFT_REQUIRE_GPU()                                                      \
  do {                                                                          \
    if (::weft::cuda::device_count() == 0) {                                    \
      GTEST_SKIP() << "no CUDA device: " << ::weft::cuda::unavailable_reason(); \
    }                                                                           \
  } while (0)

// A copy of `t` on cuda:0.
inline Tensor gpu(const Tensor& t) { return t.to(Device::cuda(0)); }
// A copy of `t` on the host.
inline Tensor host(const Tensor& t) { return t.to(Device::cpu()); }

}  // namespace weft::testing
