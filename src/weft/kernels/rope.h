// Rotary position embeddings (RoPE) as in Hugging Face's Llama: the q and k
// heads of a packed qkv activation (kernels/attention.h's layout, [q (H·D) |
// k (Hkv·D) | v (Hkv·D)] per row) rotated in place by their position, the
// "rotate-half" pairing of dimension i with i + D/2. f32 or bf16 qkv; the
// rotation in f32.
#pragma once

#include <cstdint>

#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"

namespace weft::kernels {

struct RopeConfig {
  int64_t heads = 1;            // H: query heads
  int64_t kv_heads = 0;         // 0: heads
  bool sequence_major = false;  // qkv rows (T, B, ·) instead of (B, T, ·)
  int64_t position_offset = 0;  // position of the first row of the sequence (generation)
};

// (P, D/2, 2) f32: the cos and sin of angle(p, i) = p · theta^(-2i/D) for
// positions p < P and i < D/2, computed in double then rounded to f32 (the
// same bits on every device); computed once per model.
Tensor rope_table(const ExecContext& ec, int64_t positions, int64_t head_dim, double theta);

// In place on the q and k heads of qkv (…, (H + 2·Hkv)·D), v untouched: for
// each head and i < D/2, with x1 = x[i], x2 = x[i + D/2] and the angle of the
// row's position, x[i] = x1·cos − x2·sin, x[i + D/2] = x2·cos + x1·sin.
// Row b·T + t (row t·B + b when sequence_major) is at position
// t + position_offset, which the table must cover.
void rope_forward(const ExecContext& ec, Tensor& qkv, const Tensor& table,
                  const RopeConfig& config);
// The gradient through rope_forward, in place on dq and dk of dqkv (the
// inverse rotation): dx1 = dy1·cos + dy2·sin, dx2 = dy2·cos − dy1·sin; dv
// untouched.
void rope_backward(const ExecContext& ec, Tensor& dqkv, const Tensor& table,
                   const RopeConfig& config);

}  // namespace weft::kernels
