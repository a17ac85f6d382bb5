// The attention kernels' dropout stream on the device: Philox-4x32-10 and the
// uniform of stream element n, bit for bit kernels/random.h's philox_block and
// uniform_at, so that the GPU keeps exactly the attention weights the CPU
// keeps for the same seed and offset. Internal to kernels/cuda/.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace weft::kernels::cuda {

// Word n mod 4 of the Philox-4x32-10 block at counter n / 4 under key seed
// (random.h: philox_block(seed, n)[n % 4]).
__host__ __device__ inline uint32_t attention_philox_word(uint64_t seed, uint64_t n) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kBump0 = 0x9E3779B9u, kBump1 = 0xBB67AE85u;
  const uint64_t block = n / 4;
  uint32_t c0 = static_cast<uint32_t>(block), c1 = static_cast<uint32_t>(block >> 32), c2 = 0u,
           c3 = 0u;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kBump0;
      k1 += kBump1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n1 = static_cast<uint32_t>(p1);
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    const uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
  }
  switch (n % 4) {
    case 0: return c0;
    case 1: return c1;
    case 2: return c2;
    default: return c3;
  }
}

// Stream element n as a uniform float in [0, 1) (random.h: bits_to_uniform).
__host__ __device__ inline float attention_uniform(uint64_t seed, uint64_t n) {
  return static_cast<float>(attention_philox_word(seed, n) >> 8) * 0x1p-24f;
}

}  // namespace weft::kernels::cuda
