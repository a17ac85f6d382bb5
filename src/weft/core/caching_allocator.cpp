#include "weft/core/caching_allocator.h"

#include <utility>

#include "weft/core/error.h"

namespace weft {

CachingAllocator::CachingAllocator(RawAlloc raw_alloc, RawFree raw_free)
    : raw_alloc_(std::move(raw_alloc)), raw_free_(std::move(raw_free)) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  release_cached_locked();
}

void* CachingAllocator::allocate(size_t bytes, const void* stream) {
  if (bytes == 0) return nullptr;
  const size_t size = round_size(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  auto per_stream = cached_.find(stream);
  if (per_stream != cached_.end()) {
    auto& blocks = per_stream->second;
    auto it = blocks.lower_bound(size);
    // A block more than twice the request would waste more than it saves.
    if (it != blocks.end() && it->first <= 2 * size) {
      void* p = it->second;
      const size_t held = it->first;
      blocks.erase(it);
      live_.emplace(p, Block{held, stream});
      stats_.cached_bytes -= static_cast<int64_t>(held);
      stats_.live_bytes += static_cast<int64_t>(held);
      ++stats_.reused;
      return p;
    }
  }
  void* p = raw_alloc_(size);
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
  cached_[block.stream].emplace(block.size, p);
  stats_.live_bytes -= static_cast<int64_t>(block.size);
  stats_.cached_bytes += static_cast<int64_t>(block.size);
}

void CachingAllocator::release_stream(const void* stream) {
  if (!stream) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [p, block] : live_) {
    if (block.stream == stream) block.stream = nullptr;
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
