// Memory accounting: every tensor allocation goes through allocate_bytes(),
// which counts live and peak bytes per device and per tag.
//
// Accounting goes to the calling thread's current MemoryTracker. The local
// backend runs one rank per thread and gives each rank its own tracker
// (ScopedMemoryTracker), so "peak memory per rank" means the same thing under
// threads and under MPI. Storage remembers its tracker, so memory freed on
// another thread is still credited to the right one.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "weft/core/device.h"

namespace weft {

enum class MemoryTag : uint8_t { other, params, grads, optimizer, activations, comm, weight_cache };
inline constexpr int kNumMemoryTags = 7;
std::string_view memory_tag_name(MemoryTag tag);

struct MemoryStats {
  int64_t live = 0;
  int64_t peak = 0;
  int64_t allocations = 0;  // allocations made so far (tests check steady states make none)
};

class MemoryTracker {
 public:
  // Devices beyond this index share the last slot.
  static constexpr int kMaxDevices = 9;  // cpu + cuda:0..7

  void on_alloc(Device d, MemoryTag tag, int64_t bytes);
  void on_free(Device d, MemoryTag tag, int64_t bytes);

  // Totals over all tags on one device, and per tag on one device.
  MemoryStats device(Device d) const;
  MemoryStats tag(Device d, MemoryTag tag) const;
  // Forgets peaks (sets them to the current live bytes).
  void reset_peaks();

  // The tracker of the calling thread (the process-wide one unless a
  // ScopedMemoryTracker is active).
  static MemoryTracker& current();
  static MemoryTracker& process();

 private:
  struct Counter {
    std::atomic<int64_t> live{0};
    std::atomic<int64_t> peak{0};
    std::atomic<int64_t> allocations{0};
  };
  static int slot(Device d);
  static void add(Counter& c, int64_t bytes);
  std::array<Counter, kMaxDevices> device_;
  std::array<std::array<Counter, kNumMemoryTags>, kMaxDevices> tag_;
};

// Makes `tracker` the calling thread's tracker until the scope ends.
class ScopedMemoryTracker {
 public:
  explicit ScopedMemoryTracker(MemoryTracker& tracker);
  ~ScopedMemoryTracker();
  ScopedMemoryTracker(const ScopedMemoryTracker&) = delete;
  ScopedMemoryTracker& operator=(const ScopedMemoryTracker&) = delete;

 private:
  MemoryTracker* previous_;
};

// The tag new tensors get when none is given; scoped like the tracker.
MemoryTag current_memory_tag();
class ScopedMemoryTag {
 public:
  explicit ScopedMemoryTag(MemoryTag tag);
  ~ScopedMemoryTag();
  ScopedMemoryTag(const ScopedMemoryTag&) = delete;
  ScopedMemoryTag& operator=(const ScopedMemoryTag&) = delete;

 private:
  MemoryTag previous_;
};

// Raw allocation with accounting. CPU memory is 64-byte aligned; CUDA memory
// comes from the device's caching allocator (core/cuda.h). Throws
// weft::Error for devices this build cannot allocate on. Freed host blocks of
// 1 MiB or more are kept (up to 1 GiB in all) and handed out again for the
// same size, so steady-state steps touch no fresh pages; the accounting counts
// them as freed.
void* allocate_bytes(Device d, int64_t bytes, MemoryTag tag, MemoryTracker& tracker);
void free_bytes(void* p, Device d, int64_t bytes, MemoryTag tag, MemoryTracker& tracker);

}  // namespace weft
