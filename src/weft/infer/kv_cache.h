// KvCache: the keys and values a batch of sequences has computed so far, for
// every attention layer of a model — what lets generation run one new
// position per step instead of the whole prefix.
//
// Per layer, k and v of shape (B, Hkv_local, L, D) in the model's compute
// dtype on its device, allocated once for `capacity` positions (L: at most
// the model's context) and never reallocated: only the key/value heads this
// rank holds (grouped-query attention caches Hkv heads, not H; under TP each
// rank its share, as in training), keys after the rotary rotation of their
// true position. Entry b holds positions [0, length(b)); what lies past
// them is scratch that the next write overwrites before anything reads it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "weft/nn/gpt.h"

namespace weft::infer {

class KvCache {
 public:
  // A cache for `batch` sequences of up to `capacity` positions (0: the
  // model's context) of `model`, on its device and in its compute dtype.
  KvCache(nn::Gpt& model, int64_t batch, int64_t capacity = 0);
  // The views point at the lengths: a copy would share them.
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  int64_t batch() const { return static_cast<int64_t>(length_.size()); }
  int64_t capacity() const { return capacity_; }
  // The positions entry b holds.
  int64_t length(int64_t b) const { return length_.at(static_cast<size_t>(b)); }
  std::span<const int64_t> lengths() const { return length_; }
  // Each layer's view for nn::Gpt::forward_cached: its tensors, and the
  // lengths as the positions where the new rows go.
  std::span<const nn::KvCacheView> views() const { return views_; }
  // Entry b holds `n` positions now (0 <= n <= capacity): after a forward
  // wrote them, or to forget some (a sequence started again).
  void set_length(int64_t b, int64_t n);
  // Bytes of the caches on this rank.
  int64_t bytes() const;

 private:
  int64_t capacity_;
  std::vector<int64_t> length_;
  std::vector<nn::KvCacheView> views_;
};

}  // namespace weft::infer
