#include "weft/core/memory.h"

#include <algorithm>
#include <cstdlib>
#include <new>

#include "weft/core/error.h"

namespace weft {

namespace {
thread_local MemoryTracker* t_tracker = nullptr;
thread_local MemoryTag t_tag = MemoryTag::other;
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
  WEFT_CHECK(d.is_cpu(), "cannot allocate on {}: this build of weft has no CUDA support", d);
  size_t rounded = (static_cast<size_t>(bytes) + 63) / 64 * 64;
  void* p = rounded ? std::aligned_alloc(64, rounded) : nullptr;
  if (rounded && !p) WEFT_FAIL("out of host memory allocating {} bytes", bytes);
  tracker.on_alloc(d, tag, bytes);
  return p;
}

void free_bytes(void* p, Device d, int64_t bytes, MemoryTag tag, MemoryTracker& tracker) {
  std::free(p);
  tracker.on_free(d, tag, bytes);
}

}  // namespace weft
