#include "weft/core/memory.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>

#include "weft/core/cuda.h"
#include "weft/core/error.h"

namespace weft {

namespace {
thread_local MemoryTracker* t_tracker = nullptr;
thread_local MemoryTag t_tag = MemoryTag::other;

// Freed host blocks of kCachedMin bytes or more, kept for the next request of
// the same size. glibc hands blocks above its mmap threshold (128 KiB,
// adaptively up to 32 MiB) back to the kernel when they are freed, so a
// training step that frees and reallocates its activations paid a page fault
// per 4 KiB of them every step: 17-38% of the profile of a tiny and a
// gpt2-124m step on a 2-core EPYC. A step allocates the same sizes every
// time, so exact sizes match. At most kCacheCap bytes are kept; sanitizer
// builds keep none, so that use-after-free stays visible.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr size_t kCacheCap = 0;
#else
constexpr size_t kCacheCap = size_t{1} << 30;
#endif
constexpr size_t kCachedMin = size_t{1} << 20;

struct BlockCache {
  std::mutex mu;
  std::unordered_multimap<size_t, void*> blocks;
  size_t bytes = 0;
};

// Never destroyed: tensors may be freed during static destruction.
BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache;
  return *cache;
}

void* take_cached(size_t rounded) {
  if (rounded < kCachedMin || kCacheCap == 0) return nullptr;
  BlockCache& c = block_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.blocks.find(rounded);
  if (it == c.blocks.end()) return nullptr;
  void* p = it->second;
  c.blocks.erase(it);
  c.bytes -= rounded;
  return p;
}

bool keep_cached(void* p, size_t rounded) {
  if (rounded < kCachedMin || rounded > kCacheCap) return false;
  BlockCache& c = block_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.bytes + rounded > kCacheCap) return false;
  c.blocks.emplace(rounded, p);
  c.bytes += rounded;
  return true;
}
}  // namespace

std::string_view memory_tag_name(MemoryTag tag) {
  switch (tag) {
    case MemoryTag::other: return "other";
    case MemoryTag::params: return "params";
    case MemoryTag::grads: return "grads";
    case MemoryTag::optimizer: return "optimizer";
    case MemoryTag::activations: return "activations";
    case MemoryTag::comm: return "comm";
    case MemoryTag::weight_cache: return "weight_cache";
  }
  return "?";
}

int MemoryTracker::slot(Device d) {
  if (d.is_cpu()) return 0;
  return std::min(1 + d.index, kMaxDevices - 1);
}

void MemoryTracker::add(Counter& c, int64_t bytes) {
  c.allocations.fetch_add(1, std::memory_order_relaxed);
  int64_t now = c.live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = c.peak.load(std::memory_order_relaxed);
  while (now > peak && !c.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void MemoryTracker::on_alloc(Device d, MemoryTag tag, int64_t bytes) {
  int s = slot(d);
  add(device_[s], bytes);
  add(tag_[s][static_cast<int>(tag)], bytes);
}

void MemoryTracker::on_free(Device d, MemoryTag tag, int64_t bytes) {
  int s = slot(d);
  device_[s].live.fetch_sub(bytes, std::memory_order_relaxed);
  tag_[s][static_cast<int>(tag)].live.fetch_sub(bytes, std::memory_order_relaxed);
}

MemoryStats MemoryTracker::device(Device d) const {
  const Counter& c = device_[slot(d)];
  return {c.live.load(), c.peak.load(), c.allocations.load()};
}

MemoryStats MemoryTracker::tag(Device d, MemoryTag t) const {
  const Counter& c = tag_[slot(d)][static_cast<int>(t)];
  return {c.live.load(), c.peak.load(), c.allocations.load()};
}

void MemoryTracker::reset_peaks() {
  for (int s = 0; s < kMaxDevices; ++s) {
    device_[s].peak.store(device_[s].live.load());
    for (auto& c : tag_[s]) c.peak.store(c.live.load());
  }
}

MemoryTracker& MemoryTracker::process() {
  static MemoryTracker tracker;
  return tracker;
}

MemoryTracker& MemoryTracker::current() { return t_tracker ? *t_tracker : process(); }

ScopedMemoryTracker::ScopedMemoryTracker(MemoryTracker& tracker) : previous_(t_tracker) {
  t_tracker = &tracker;
}
ScopedMemoryTracker::~ScopedMemoryTracker() { t_tracker = previous_; }

MemoryTag current_memory_tag() { return t_tag; }
ScopedMemoryTag::ScopedMemoryTag(MemoryTag tag) : previous_(t_tag) { t_tag = tag; }
ScopedMemoryTag::~ScopedMemoryTag() { t_tag = previous_; }

void* allocate_bytes(Device d, int64_t bytes, MemoryTag tag, MemoryTracker& tracker) {
  WEFT_CHECK(bytes >= 0, "cannot allocate a negative number of bytes ({})", bytes);
  if (d.is_cuda()) {
    void* p = cuda::allocate(d, static_cast<size_t>(bytes));
    tracker.on_alloc(d, tag, bytes);
    return p;
  }
  size_t rounded = (static_cast<size_t>(bytes) + 63) / 64 * 64;
  void* p = take_cached(rounded);
  if (!p && rounded) p = std::aligned_alloc(64, rounded);
  if (rounded && !p) WEFT_FAIL("out of host memory allocating {} bytes", bytes);
  tracker.on_alloc(d, tag, bytes);
  return p;
}

void free_bytes(void* p, Device d, int64_t bytes, MemoryTag tag, MemoryTracker& tracker) {
  if (d.is_cuda()) {
    cuda::release(p, d);
    tracker.on_free(d, tag, bytes);
    return;
  }
  if (!p || !keep_cached(p, (static_cast<size_t>(bytes) + 63) / 64 * 64)) std::free(p);
  tracker.on_free(d, tag, bytes);
}

}  // namespace weft
