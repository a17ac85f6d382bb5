// The shape of an attention call: what kernels/attention.cpp checks once,
// before the dispatch, and both backends read. Internal to kernels/.
#pragma once

#include <cstdint>

#include "weft/core/tensor.h"
#include "weft/kernels/attention.h"

namespace weft::kernels::detail {

struct AttentionDims {
  int64_t B, T, C, H, D;
  // Token (b, t) is row t·B + b of the activations instead of b·T + t.
  bool sequence_major;

  // Rows between consecutive batch entries and between consecutive positions.
  int64_t batch_rows() const { return sequence_major ? 1 : T; }
  int64_t position_rows() const { return sequence_major ? B : 1; }
  // The shape of an activation of `width` columns.
  Shape tokens(int64_t width) const {
    return sequence_major ? Shape{T, B, width} : Shape{B, T, width};
  }
};

// qkv's dimensions under `cfg` (a qkv that kernels/attention.cpp accepted).
inline AttentionDims attention_dims(const Tensor& qkv, const AttentionConfig& cfg) {
  const int64_t C = qkv.size(2) / 3;
  const int64_t B = cfg.sequence_major ? qkv.size(1) : qkv.size(0);
  const int64_t T = cfg.sequence_major ? qkv.size(0) : qkv.size(1);
  return {B, T, C, cfg.heads, C / cfg.heads, cfg.sequence_major};
}

}  // namespace weft::kernels::detail
