// Counter-based random numbers (Philox-4x32-10) and dropout.
//
// A stream is a 64-bit seed; its element n is word n mod 4 of the Philox block
// at counter n / 4 under the key seed. Nothing is carried from one number to
// the next, so element n is the same on any thread, for any thread count and
// in any run, and a kernel that needs `count` numbers names them by
// (seed, offset .. offset + count - 1). Callers advance their offset by the
// count a kernel consumes so that two calls never reuse a number.
//
// Philox-4x32-10 is from Salmon, Moraes, Dror and Shaw, "Parallel Random
// Numbers: As Easy as 1, 2, 3" (SC11); the same generator as Random123's
// philox4x32 with 10 rounds and cuRAND's Philox4_32_10.
#pragma once

#include <array>
#include <cstdint>

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::kernels {

// One Philox-4x32-10 block: four 32-bit words from a 128-bit counter and a
// 64-bit key (low word first in both).
inline std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr,
                                             std::array<uint32_t, 2> key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  // Weyl increments of the key between rounds (golden ratio, sqrt(3) - 1).
  constexpr uint32_t kBump0 = 0x9E3779B9u, kBump1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kBump0;
      key[1] += kBump1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
  }
  return ctr;
}

// The block holding stream element n (at index n mod 4).
inline std::array<uint32_t, 4> philox_block(uint64_t seed, uint64_t n) {
  const uint64_t block = n / 4;
  return philox4x32_10({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u},
                       {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

// The top 24 bits as a float: every value is exact and the largest is 1 - 2^-24.
inline float bits_to_uniform(uint32_t bits) { return static_cast<float>(bits >> 8) * 0x1p-24f; }

// Element offset + i of stream `seed` as a uniform float in [0, 1).
inline float uniform_at(uint64_t seed, uint64_t offset, uint64_t i) {
  const uint64_t n = offset + i;
  return bits_to_uniform(philox_block(seed, n)[n % 4]);
}

// Calls f(i, uniform_at(seed, offset, i)) for i = 0 .. count-1 in order,
// computing each Philox block once.
template <typename F>
void for_each_uniform(uint64_t seed, uint64_t offset, int64_t count, F&& f) {
  int64_t i = 0;
  while (i < count) {
    const uint64_t n = offset + static_cast<uint64_t>(i);
    const std::array<uint32_t, 4> words = philox_block(seed, n);
    for (uint64_t w = n % 4; w < 4 && i < count; ++w, ++i) f(i, bits_to_uniform(words[w]));
  }
}

// out (N) f32: out[i] = uniform_at(seed, offset, i)
void fill_uniform(const ExecContext& ec, uint64_t seed, uint64_t offset, Tensor& out);

// Inverted dropout, f32 or bf16 (x and y the same dtype). Element i is kept
// when uniform_at(seed, offset, i) >= p, so a call consumes x.numel() numbers.
// x (N) -> y (N) = x·mask/(1-p), mask (N) u8 (1 kept, 0 dropped)
// p must lie in [0, 1); p = 0 copies x and sets every mask byte to 1.
void dropout_forward(const ExecContext& ec, const Tensor& x, float p, uint64_t seed,
                     uint64_t offset, Tensor& y, Tensor& mask);
// dy (N), mask (N) u8 -> dx (N) = dy·mask/(1-p)
void dropout_backward(const ExecContext& ec, const Tensor& dy, const Tensor& mask, float p,
                      Tensor& dx);

// Transition: the forms without a context, until nn/ and parallel/ are migrated (issue 11).
inline void fill_uniform(uint64_t seed, uint64_t offset, Tensor& out) {
  fill_uniform(ExecContext::host(), seed, offset, out);
}
inline void dropout_forward(const Tensor& x, float p, uint64_t seed, uint64_t offset, Tensor& y,
                            Tensor& mask) {
  dropout_forward(ExecContext::host(), x, p, seed, offset, y, mask);
}
inline void dropout_backward(const Tensor& dy, const Tensor& mask, float p, Tensor& dx) {
  dropout_backward(ExecContext::host(), dy, mask, p, dx);
}

}  // namespace weft::kernels
