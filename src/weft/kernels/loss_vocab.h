// The logits of the cross-entropy kernels as kernels/loss.cpp checked them
// and both backends read them. Internal to kernels/.
#pragma once

#include <algorithm>
#include <cstdint>

#include "weft/core/tensor.h"
#include "weft/kernels/loss.h"

namespace weft::kernels::detail {

// The logits as the kernels see them, with the padding resolved.
struct Vocab {
  int64_t rows = 0;         // N
  int64_t cols = 0;         // V, columns of this slice
  int64_t start = 0;        // vocabulary id of column 0
  int64_t valid_vocab = 0;  // ids >= this are padding
  int64_t valid_cols = 0;   // columns [0, valid_cols) of the slice are real
};

// logits (N, V) and the options, already checked (kernels/loss.cpp).
inline Vocab vocab_of(const Tensor& logits, const CrossEntropyOptions& opt) {
  Vocab v;
  v.rows = logits.size(0);
  v.cols = logits.size(1);
  v.start = opt.vocab_start;
  v.valid_vocab = opt.valid_vocab > 0 ? opt.valid_vocab : opt.vocab_start + v.cols;
  v.valid_cols = std::clamp<int64_t>(v.valid_vocab - v.start, 0, v.cols);
  return v;
}

}  // namespace weft::kernels::detail
