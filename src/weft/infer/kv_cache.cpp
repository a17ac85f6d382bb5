#include "weft/infer/kv_cache.h"

namespace weft::infer {

KvCache::KvCache(nn::Gpt& model, int64_t batch, int64_t capacity)
    : capacity_(capacity == 0 ? model.config().seq : capacity),
      length_(static_cast<size_t>(std::max<int64_t>(batch, 0)), 0) {
  const nn::GptConfig& cfg = model.config();
  WEFT_CHECK(batch >= 1, "a key/value cache needs at least one sequence, got {}", batch);
  WEFT_CHECK(capacity_ >= 1 && capacity_ <= cfg.seq,
             "a key/value cache holds 1 to {} positions (the model's context), asked for {}",
             cfg.seq, capacity_);
  const parallel::ParallelContext& pc = *model.context();
  const int64_t head_dim = cfg.width / cfg.heads;
  for (int64_t i = 0; i < cfg.layers; ++i) {
    const int64_t heads = model.layer(i).attn().local_kv_heads();
    const Shape shape{batch, heads, capacity_, head_dim};
    views_.push_back({pc.exec.zeros(shape, pc.compute(), MemoryTag::activations),
                      pc.exec.zeros(shape, pc.compute(), MemoryTag::activations), length_});
  }
}

void KvCache::set_length(int64_t b, int64_t n) {
  WEFT_CHECK(b >= 0 && b < batch() && n >= 0 && n <= capacity_,
             "key/value cache entry {} of {} cannot hold {} positions (capacity {})", b, batch(), n,
             capacity_);
  length_[static_cast<size_t>(b)] = n;
}

int64_t KvCache::bytes() const {
  int64_t n = 0;
  for (const nn::KvCacheView& v : views_) n += v.k.nbytes() + v.v.nbytes();
  return n;
}

}  // namespace weft::infer
