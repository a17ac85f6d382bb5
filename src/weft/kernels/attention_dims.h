// The shape of an attention call: what kernels/attention.cpp checks once,
// before the dispatch, and both backends read. Internal to kernels/.
#pragma once

#include <cstdint>

#include "weft/core/tensor.h"
#include "weft/kernels/attention.h"

namespace weft::kernels::detail {

struct AttentionDims {
  // C = H·D: the width of q and of the output; Hkv: the key/value heads.
  int64_t B, T, C, H, D, Hkv;
  // Token (b, t) is row t·B + b of the activations instead of b·T + t.
  bool sequence_major;

  // Rows between consecutive batch entries and between consecutive positions.
  int64_t batch_rows() const { return sequence_major ? 1 : T; }
  int64_t position_rows() const { return sequence_major ? B : 1; }
  // The shape of an activation of `width` columns.
  Shape tokens(int64_t width) const {
    return sequence_major ? Shape{T, B, width} : Shape{B, T, width};
  }
  // The packed qkv row: [q (H·D) | k (Hkv·D) | v (Hkv·D)].
  int64_t width() const { return (H + 2 * Hkv) * D; }
  // The first column of part 0 (q), 1 (k) or 2 (v) of a qkv row, and its heads.
  int64_t part_column(int64_t part) const { return part == 0 ? 0 : (H + (part - 1) * Hkv) * D; }
  int64_t part_heads(int64_t part) const { return part == 0 ? H : Hkv; }
  // The key/value head that query head h reads (modulo: the models lay out
  // their heads so that query heads h, h + Hkv, ... share one).
  int64_t kv_head(int64_t h) const { return h % Hkv; }
};

// The key/value heads of `cfg`: kv_heads, or heads when 0 (multi-head).
inline int64_t kv_heads(const AttentionConfig& cfg) {
  return cfg.kv_heads == 0 ? cfg.heads : cfg.kv_heads;
}

// qkv's dimensions under `cfg` (a qkv that kernels/attention.cpp accepted).
inline AttentionDims attention_dims(const Tensor& qkv, const AttentionConfig& cfg) {
  const int64_t Hkv = kv_heads(cfg);
  const int64_t D = qkv.size(2) / (cfg.heads + 2 * Hkv);
  const int64_t B = cfg.sequence_major ? qkv.size(1) : qkv.size(0);
  const int64_t T = cfg.sequence_major ? qkv.size(0) : qkv.size(1);
  return {B, T, cfg.heads * D, cfg.heads, D, Hkv, cfg.sequence_major};
}

}  // namespace weft::kernels::detail
