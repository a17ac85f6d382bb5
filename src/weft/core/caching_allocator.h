// CachingAllocator: the bookkeeping of weft's device memory, independent of
// the device so that it is tested on any machine.
//
// Device allocations (cudaMalloc) synchronize the device and cost tens of
// microseconds; a training step allocates and frees the same sizes every
// time. Freed blocks are therefore kept and handed to the next request that
// fits, so a steady-state step allocates nothing from the driver.
//
// Blocks belong to the stream they were allocated for, as in PyTorch's
// allocator: work on one stream runs in order, so a block freed on the host
// while a kernel queued on its stream still reads it may go to the next
// allocation on that same stream (whose kernels run after the reader), but
// never to another stream. A block that work on a second stream uses is
// marked with record_stream (PyTorch's): when it is freed, an event is
// recorded on each such stream, and the block returns to its stream's cache
// only once those events completed, so no later allocation overwrites memory
// that a side stream's queued work (a collective, a prefetch) still reads.
//
// A request is served by the smallest cached block of its stream that holds
// it and wastes less than half of it; sizes are rounded to 512 bytes. When
// the driver refuses an allocation, every cached block is returned to it
// (release_cached) and the allocation is tried once more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace weft {

class CachingAllocator {
 public:
  // raw_alloc returns null when the device is out of memory; raw_free gives
  // a block back to the driver.
  using RawAlloc = std::function<void*(size_t bytes)>;
  using RawFree = std::function<void(void* p)>;

  struct Stats {
    int64_t driver_allocations = 0;  // raw_alloc calls that succeeded
    int64_t driver_frees = 0;
    int64_t reused = 0;          // requests served from the cache
    int64_t reserved_bytes = 0;  // held from the driver: live + cached
    int64_t cached_bytes = 0;    // free blocks kept
    int64_t live_bytes = 0;      // handed out and not yet freed (rounded sizes)
    int64_t deferred_bytes = 0;  // freed, waiting for other streams' work on them
  };

  // Markers of a point in a stream's work (CUDA events): `record` marks the
  // work queued on a stream so far, `done` says whether all of it finished,
  // `wait` blocks the host until it did, `destroy` releases the marker.
  struct StreamEvents {
    std::function<void*(const void* stream)> record;
    std::function<bool(void* event)> done;
    std::function<void(void* event)> wait;
    std::function<void(void* event)> destroy;
  };

  CachingAllocator(RawAlloc raw_alloc, RawFree raw_free, StreamEvents events = {});
  ~CachingAllocator();  // returns every cached block; live blocks are leaked
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` for work on `stream` (an opaque handle);
  // null only for 0 bytes. Throws weft::Error when the device has no memory
  // left even after the cache was emptied.
  void* allocate(size_t bytes, const void* stream);
  // Returns a block from allocate() to the cache of its stream, at once or,
  // when other streams used it (record_stream), once their work finished.
  void free(void* p);
  // Work queued on `stream` uses the live block `p` (allocated for another
  // stream): its free waits for that work. Nothing to do for p's own stream.
  // Needs StreamEvents.
  void record_stream(void* p, const void* stream);
  // Gives every cached block back to the driver.
  void release_cached();
  // `stream` is going away (its work finished): its cached blocks go back to
  // the driver, and its live blocks join the null stream's cache when freed,
  // so no later stream given the same handle inherits them.
  void release_stream(const void* stream);

  Stats stats() const;
  static size_t round_size(size_t bytes) { return (bytes + 511) / 512 * 512; }

 private:
  struct Block {
    size_t size;
    const void* stream;
    std::vector<const void*> used_on{};  // other streams (record_stream)
  };
  // A freed block whose other streams' work may still run.
  struct Deferred {
    void* p;
    Block block;
    std::vector<void*> events;
  };
  void release_cached_locked();
  void cache_locked(void* p, const Block& block);
  // Caches the deferred blocks whose events completed (all of them, waiting
  // for each, with `wait`).
  void collect_deferred_locked(bool wait);
  // The smallest cached block of `stream` that fits `size`, or null.
  void* take_cached_locked(size_t size, const void* stream);

  RawAlloc raw_alloc_;
  RawFree raw_free_;
  mutable std::mutex mu_;
  StreamEvents events_;
  std::unordered_map<void*, Block> live_;
  std::vector<Deferred> deferred_;
  // Per stream: size -> block.
  std::map<const void*, std::multimap<size_t, void*>> cached_;
  Stats stats_;
};

}  // namespace weft
