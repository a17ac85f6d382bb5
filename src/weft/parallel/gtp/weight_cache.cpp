#include "weft/parallel/gtp/weight_cache.h"

#include <algorithm>

#include "weft/parallel/gtp/options.h"

namespace weft::parallel::gtp {

const char* use_name(Use u) {
  switch (u) {
    case Use::forward: return "forward";
    case Use::backward: return "backward";
    case Use::gradient: return "gradient";
  }
  return "?";
}

const char* grad_accumulation_name(GradAccumulation g) {
  return g == GradAccumulation::shard ? "shard" : "full";
}

GradAccumulation parse_grad_accumulation(const std::string& s) {
  if (s == "shard") return GradAccumulation::shard;
  if (s == "full") return GradAccumulation::full;
  WEFT_FAIL(
      "unknown GTP gradient accumulation '{}': use shard (reduce-scatter every microbatch into "
      "the shard) or full (accumulate the full gradient, reduce-scatter once a step)",
      s);
}

WeightCache::WeightCache(int max_live_weights, ExecContext exec)
    : max_live_weights_(max_live_weights), exec_(exec) {
  WEFT_CHECK(max_live_weights >= 1,
             "the GTP weight cache must keep at least one gathered weight alive, got {}",
             max_live_weights);
}

WeightCache::Ticket WeightCache::reserve(const Shape& shape, DType dtype, Use use) {
  Key key{{}, dtype, use};
  for (int d = 0; d < shape.rank(); ++d) key.shape.push_back(shape[d]);
  slots_.push_back({std::move(key), shape, Tensor()});
  return static_cast<Ticket>(slots_.size() - 1);
}

Tensor WeightCache::get(Ticket ticket) {
  WEFT_CHECK(ticket >= 0 && ticket < static_cast<Ticket>(slots_.size()),
             "weight cache: unknown ticket {}", ticket);
  Slot& s = slots_[static_cast<size_t>(ticket)];
  if (s.buffer.defined()) return s.buffer;
  const bool weight = s.key.use != Use::gradient;
  WEFT_CHECK(!weight || live_weights_ < max_live_weights_,
             "weight cache: a {} weight of shape {} would make {} gathered weights alive, more "
             "than the {} the cache keeps",
             use_name(s.key.use), s.shape, live_weights_ + 1, max_live_weights_);
  std::vector<Tensor>& pool = pool_[s.key];
  if (!pool.empty()) {
    s.buffer = std::move(pool.back());
    pool.pop_back();
  } else {
    s.buffer = exec_.empty(s.shape, s.key.dtype, MemoryTag::weight_cache);
    ++buffers_;
    bytes_ += s.buffer.nbytes();
  }
  if (weight) peak_live_weights_ = std::max(peak_live_weights_, ++live_weights_);
  return s.buffer;
}

void WeightCache::release(Ticket ticket) {
  WEFT_CHECK(ticket >= 0 && ticket < static_cast<Ticket>(slots_.size()),
             "weight cache: unknown ticket {}", ticket);
  Slot& s = slots_[static_cast<size_t>(ticket)];
  if (!s.buffer.defined()) return;
  pool_[s.key].push_back(std::move(s.buffer));
  s.buffer = Tensor();
  if (s.key.use != Use::gradient) --live_weights_;
}

bool WeightCache::held(Ticket ticket) const {
  return ticket >= 0 && ticket < static_cast<Ticket>(slots_.size()) &&
         slots_[static_cast<size_t>(ticket)].buffer.defined();
}

}  // namespace weft::parallel::gtp
