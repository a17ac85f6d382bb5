#include "weft/core/caching_allocator.h"

#include <algorithm>
#include <utility>

#include "weft/core/error.h"

namespace weft {

CachingAllocator::CachingAllocator(RawAlloc raw_alloc, RawFree raw_free, StreamEvents events)
    : raw_alloc_(std::move(raw_alloc)),
      raw_free_(std::move(raw_free)),
      events_(std::move(events)) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  collect_deferred_locked(true);
  release_cached_locked();
}

void* CachingAllocator::take_cached_locked(size_t size, const void* stream) {
  auto per_stream = cached_.find(stream);
  if (per_stream == cached_.end()) return nullptr;
  auto& blocks = per_stream->second;
  auto it = blocks.lower_bound(size);
  // A block more than twice the request would waste more than it saves.
  if (it == blocks.end() || it->first > 2 * size) return nullptr;
  void* p = it->second;
  const size_t held = it->first;
  blocks.erase(it);
  live_.emplace(p, Block{held, stream});
  stats_.cached_bytes -= static_cast<int64_t>(held);
  stats_.live_bytes += static_cast<int64_t>(held);
  ++stats_.reused;
  return p;
}

void CachingAllocator::cache_locked(void* p, const Block& block) {
  cached_[block.stream].emplace(block.size, p);
  stats_.cached_bytes += static_cast<int64_t>(block.size);
}

void CachingAllocator::collect_deferred_locked(bool wait) {
  std::erase_if(deferred_, [&](Deferred& d) {
    for (void* e : d.events) {
      if (wait) {
        events_.wait(e);
      } else if (!events_.done(e)) {
        return false;
      }
    }
    for (void* e : d.events) events_.destroy(e);
    stats_.deferred_bytes -= static_cast<int64_t>(d.block.size);
    cache_locked(d.p, d.block);
    return true;
  });
}

void* CachingAllocator::allocate(size_t bytes, const void* stream) {
  if (bytes == 0) return nullptr;
  const size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  if (!deferred_.empty()) collect_deferred_locked(false);
  if (void* cached = take_cached_locked(size, stream)) return cached;
  void* p = raw_alloc_(size);
  if (!p && !deferred_.empty()) {
    // Out of memory: the blocks other streams still use are worth a wait.
    collect_deferred_locked(true);
    if (void* cached = take_cached_locked(size, stream)) return cached;
  }
  if (!p) {
    release_cached_locked();
    p = raw_alloc_(size);
  }
  WEFT_CHECK(p != nullptr,
             "out of device memory allocating {} bytes ({} bytes live): use a smaller batch "
             "(--micro-batch with --grad-accum) or sequence length, or shard the model over "
             "more GPUs",
             bytes, stats_.live_bytes);
  live_.emplace(p, Block{size, stream});
  ++stats_.driver_allocations;
  stats_.reserved_bytes += static_cast<int64_t>(size);
  stats_.live_bytes += static_cast<int64_t>(size);
  return p;
}

void CachingAllocator::free(void* p) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(p);
  WEFT_CHECK(it != live_.end(), "freeing a device pointer {} that this allocator did not hand out",
             p);
  const Block block = it->second;
  live_.erase(it);
  stats_.live_bytes -= static_cast<int64_t>(block.size);
  if (block.used_on.empty()) {
    cache_locked(p, block);
    return;
  }
  Deferred d{.p = p, .block = block, .events = {}};
  for (const void* s : block.used_on) d.events.push_back(events_.record(s));
  d.block.used_on.clear();
  stats_.deferred_bytes += static_cast<int64_t>(block.size);
  deferred_.push_back(std::move(d));
}

void CachingAllocator::record_stream(void* p, const void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(p);
  WEFT_CHECK(it != live_.end(), "record_stream: {} is not a live block of this allocator", p);
  WEFT_CHECK(events_.record && events_.done && events_.wait && events_.destroy,
             "record_stream: this allocator was built without stream events");
  Block& block = it->second;
  if (stream == block.stream) return;
  if (std::find(block.used_on.begin(), block.used_on.end(), stream) == block.used_on.end())
    block.used_on.push_back(stream);
}

void CachingAllocator::release_stream(const void* stream) {
  if (!stream) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [p, block] : live_) {
    if (block.stream == stream) block.stream = nullptr;
    // Its work finished: a later free need not wait for it.
    std::erase(block.used_on, stream);
  }
  for (Deferred& d : deferred_) {
    if (d.block.stream == stream) d.block.stream = nullptr;
  }
  auto it = cached_.find(stream);
  if (it == cached_.end()) return;
  for (auto& [size, p] : it->second) {
    raw_free_(p);
    ++stats_.driver_frees;
    stats_.reserved_bytes -= static_cast<int64_t>(size);
    stats_.cached_bytes -= static_cast<int64_t>(size);
  }
  cached_.erase(it);
}

void CachingAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mu_);
  release_cached_locked();
}

void CachingAllocator::release_cached_locked() {
  for (auto& [stream, blocks] : cached_) {
    for (auto& [size, p] : blocks) {
      raw_free_(p);
      ++stats_.driver_frees;
      stats_.reserved_bytes -= static_cast<int64_t>(size);
      stats_.cached_bytes -= static_cast<int64_t>(size);
    }
  }
  cached_.clear();
}

CachingAllocator::Stats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace weft
