// Philox-4x32-10 for device code (and host code compiled by nvcc): the same
// counter and key layout, rounds and float conversion as kernels/random.h, so
// element n of stream `seed` is bit for bit the CPU's. Kernels that draw
// random numbers on the GPU (dropout, the attention kernels' dropout) include
// this; kernels/random.h stays free of CUDA.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace weft::kernels::cuda {

// One block: four 32-bit words from a 128-bit counter (x low .. w high) and a
// 64-bit key (x low, y high).
__host__ __device__ inline uint4 philox4x32_10(uint4 ctr, uint2 key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kBump0 = 0x9E3779B9u, kBump1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key.x += kBump0;
      key.y += kBump1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * ctr.x;
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * ctr.z;
    ctr = make_uint4(static_cast<uint32_t>(p1 >> 32) ^ ctr.y ^ key.x, static_cast<uint32_t>(p1),
                     static_cast<uint32_t>(p0 >> 32) ^ ctr.w ^ key.y, static_cast<uint32_t>(p0));
  }
  return ctr;
}

// Block number `block` of stream `seed`: it holds elements 4·block .. 4·block + 3.
__host__ __device__ inline uint4 philox_stream_block(uint64_t seed, uint64_t block) {
  return philox4x32_10(
      make_uint4(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u),
      make_uint2(static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)));
}

__host__ __device__ inline uint32_t philox_word(uint4 words, uint64_t index) {
  switch (index & 3u) {
    case 0: return words.x;
    case 1: return words.y;
    case 2: return words.z;
    default: return words.w;
  }
}

// The top 24 bits as a float in [0, 1): exact, as kernels/random.h.
__host__ __device__ inline float bits_to_uniform(uint32_t bits) {
  return static_cast<float>(bits >> 8) * 0x1p-24f;
}

// Element offset + i of stream `seed` as a uniform float in [0, 1).
__host__ __device__ inline float uniform_at(uint64_t seed, uint64_t offset, uint64_t i) {
  const uint64_t n = offset + i;
  return bits_to_uniform(philox_word(philox_stream_block(seed, n / 4), n));
}

}  // namespace weft::kernels::cuda
