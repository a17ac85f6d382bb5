#include "weft/core/caching_allocator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <utility>

#include "testing.h"
#include "weft/core/error.h"

namespace weft {
namespace {

using weft::testing::error_of;

// Host memory stands in for the device: the bookkeeping is the same.
struct HostBacked {
  explicit HostBacked(CachingAllocator::StreamEvents events = {})
      : allocator(
            [this](size_t bytes) -> void* {
              if (limit >= 0 && static_cast<int64_t>(outstanding.size()) >= limit) return nullptr;
              void* p = std::malloc(bytes);
              outstanding.insert(p);
              return p;
            },
            [this](void* p) {
              outstanding.erase(p);
              std::free(p);
            },
            std::move(events)) {}
  std::set<void*> outstanding;
  int64_t limit = -1;  // raw_alloc fails beyond this many outstanding blocks
  CachingAllocator allocator;
};

// Events a test completes by hand: record returns a fresh marker, done is true
// once the test finished it (or `wait` did).
struct FakeEvents {
  std::set<int*> live, finished;
  int waits = 0;
  CachingAllocator::StreamEvents events() {
    return {.record = [this](const void*) -> void* { return *live.insert(new int(0)).first; },
            .done = [this](void* e) { return finished.count(static_cast<int*>(e)) > 0; },
            .wait =
                [this](void* e) {
                  ++waits;
                  finished.insert(static_cast<int*>(e));
                },
            .destroy =
                [this](void* e) {
                  live.erase(static_cast<int*>(e));
                  delete static_cast<int*>(e);
                }};
  }
  void finish_all() { finished.insert(live.begin(), live.end()); }
};

// A host-backed allocator with events the test completes.
struct WithEvents {
  FakeEvents fake;
  HostBacked backed{fake.events()};
  CachingAllocator& allocator = backed.allocator;
};

const int kStreamA = 0, kStreamB = 0;
const void* const a = &kStreamA;
const void* const b = &kStreamB;

TEST(CachingAllocator, SteadyStateReusesBlocksWithoutTheDriver) {
  HostBacked h;
  for (int step = 0; step < 5; ++step) {
    void* x = h.allocator.allocate(1000, a);
    void* y = h.allocator.allocate(1 << 20, a);
    h.allocator.free(x);
    h.allocator.free(y);
  }
  const auto s = h.allocator.stats();
  EXPECT_EQ(s.driver_allocations, 2);
  EXPECT_EQ(s.reused, 8);
  EXPECT_EQ(s.live_bytes, 0);
  EXPECT_EQ(s.cached_bytes, s.reserved_bytes);
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(CachingAllocator::round_size(1000) + (1 << 20)));
}

TEST(CachingAllocator, NeverHandsABlockToAnotherStream) {
  HostBacked h;
  void* x = h.allocator.allocate(4096, a);
  h.allocator.free(x);
  void* y = h.allocator.allocate(4096, b);
  EXPECT_NE(x, y);
  void* z = h.allocator.allocate(4096, a);
  EXPECT_EQ(x, z);
  EXPECT_EQ(h.allocator.stats().driver_allocations, 2);
  h.allocator.free(y);
  h.allocator.free(z);
}

TEST(CachingAllocator, TakesTheSmallestFittingBlockButNotAWastefulOne) {
  HostBacked h;
  void* small = h.allocator.allocate(2048, a);
  void* big = h.allocator.allocate(65536, a);
  h.allocator.free(small);
  h.allocator.free(big);
  EXPECT_EQ(h.allocator.allocate(1500, a), small);  // 2048 fits 1536 within 2x
  void* fresh = h.allocator.allocate(4096, a);      // 65536 is over 2x: a new block
  EXPECT_NE(fresh, big);
  EXPECT_EQ(h.allocator.stats().driver_allocations, 3);
  h.allocator.free(small);
  h.allocator.free(fresh);
}

TEST(CachingAllocator, OutOfMemoryReleasesTheCacheAndRetries) {
  HostBacked h;
  h.limit = 2;
  void* x = h.allocator.allocate(512, a);
  void* y = h.allocator.allocate(512, b);
  h.allocator.free(y);
  // A third driver block exceeds the limit: the cached one of stream b is
  // given back, and the retry succeeds.
  void* z = h.allocator.allocate(1 << 16, a);
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(h.allocator.stats().driver_frees, 1);
  EXPECT_EQ(h.outstanding.size(), 2u);
  h.allocator.free(x);
  h.allocator.free(z);
}

TEST(CachingAllocator, ExhaustedDeviceIsAClearError) {
  HostBacked h;
  h.limit = 1;
  void* x = h.allocator.allocate(512, a);
  try {
    h.allocator.allocate(1024, a);
    FAIL() << "expected an out-of-memory error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of device memory allocating 1024 bytes"),
              std::string::npos)
        << e.what();
  }
  h.allocator.free(x);
}

TEST(CachingAllocator, ForeignPointerIsAnError) {
  HostBacked h;
  int local = 0;
  EXPECT_THROW(h.allocator.free(&local), Error);
  EXPECT_EQ(h.allocator.allocate(0, a), nullptr);
}

TEST(CachingAllocator, AReleasedStreamLeavesNothingToItsHandle) {
  HostBacked h;
  void* cached = h.allocator.allocate(4096, a);
  void* live = h.allocator.allocate(8192, a);
  h.allocator.free(cached);
  h.allocator.release_stream(a);
  EXPECT_EQ(h.allocator.stats().driver_frees, 1);  // the cached block went back
  EXPECT_EQ(h.outstanding.count(cached), 0u);
  // The live block, freed after its stream went away, is the null stream's now:
  // a new stream with the old handle does not get it, a null-stream request does.
  h.allocator.free(live);
  void* fresh = h.allocator.allocate(8192, a);
  EXPECT_NE(fresh, live);
  EXPECT_EQ(h.allocator.allocate(8192, nullptr), live);
  h.allocator.free(fresh);
  h.allocator.free(live);
}

TEST(CachingAllocator, DestructionReturnsCachedBlocks) {
  std::set<void*> outstanding;
  {
    CachingAllocator alloc(
        [&](size_t bytes) {
          void* p = std::malloc(bytes);
          outstanding.insert(p);
          return p;
        },
        [&](void* p) {
          outstanding.erase(p);
          std::free(p);
        });
    alloc.free(alloc.allocate(100, a));
    alloc.free(alloc.allocate(100000, b));
    EXPECT_EQ(outstanding.size(), 2u);
  }
  EXPECT_TRUE(outstanding.empty());
}

// A block a side stream used is not handed out again, not even on its own
// stream, until the side stream's work queued before the free finished.
TEST(CachingAllocator, ABlockUsedOnAnotherStreamWaitsForThatStreamsWork) {
  WithEvents h;
  void* x = h.allocator.allocate(4096, a);
  h.allocator.record_stream(x, b);
  h.allocator.free(x);
  EXPECT_EQ(h.allocator.stats().deferred_bytes, 4096);
  void* y = h.allocator.allocate(4096, a);
  EXPECT_NE(x, y);  // b may still read x
  h.fake.finish_all();
  void* z = h.allocator.allocate(4096, a);
  EXPECT_EQ(x, z);
  EXPECT_EQ(h.allocator.stats().deferred_bytes, 0);
  EXPECT_TRUE(h.fake.live.empty());  // the event was destroyed
  h.allocator.free(y);
  h.allocator.free(z);
}

TEST(CachingAllocator, RecordingItsOwnStreamDefersNothing) {
  WithEvents h;
  void* x = h.allocator.allocate(4096, a);
  h.allocator.record_stream(x, a);
  h.allocator.free(x);
  EXPECT_EQ(h.allocator.stats().deferred_bytes, 0);
  EXPECT_EQ(h.allocator.allocate(4096, a), x);
  h.allocator.free(x);
}

// Out of memory, the allocator waits for the side streams rather than fail.
TEST(CachingAllocator, OutOfMemoryWaitsForDeferredBlocks) {
  WithEvents h;
  h.backed.limit = 1;
  void* x = h.allocator.allocate(4096, a);
  h.allocator.record_stream(x, b);
  h.allocator.free(x);
  void* y = h.allocator.allocate(4096, a);
  EXPECT_EQ(x, y);
  EXPECT_EQ(h.fake.waits, 1);
  h.allocator.free(y);
}

// A finished stream's uses no longer defer, and a released stream's deferred
// blocks join the null stream's cache, not a later stream with its handle.
TEST(CachingAllocator, AReleasedStreamNeitherDefersNorInherits) {
  WithEvents h;
  void* x = h.allocator.allocate(4096, a);
  h.allocator.record_stream(x, b);
  h.allocator.release_stream(b);
  h.allocator.free(x);
  EXPECT_EQ(h.allocator.stats().deferred_bytes, 0);
  void* y = h.allocator.allocate(4096, a);
  h.allocator.record_stream(y, b);
  h.allocator.free(y);
  h.allocator.release_stream(a);
  h.fake.finish_all();
  void* z = h.allocator.allocate(4096, nullptr);
  EXPECT_EQ(z, y);
  h.allocator.free(z);
}

TEST(CachingAllocator, RecordStreamNeedsEventsAndALiveBlock) {
  HostBacked h;
  void* x = h.allocator.allocate(4096, a);
  EXPECT_NE(error_of([&] { h.allocator.record_stream(x, b); }).find("without stream events"),
            std::string::npos);
  WithEvents e;
  int local = 0;
  EXPECT_NE(error_of([&] { e.allocator.record_stream(&local, b); }).find("not a live block"),
            std::string::npos);
  h.allocator.free(x);
}

}  // namespace
}  // namespace weft
