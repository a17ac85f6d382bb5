#include "weft/core/tensor.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "weft/core/cuda.h"
#include "weft/core/device.h"
#include "weft/core/error.h"
#include "weft/core/memory.h"
#include "weft/core/threads.h"

namespace weft {
namespace {

TEST(Shape, NumelRowsAndPrinting) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.rows(), 6);
  EXPECT_EQ(s.last(), 4);
  EXPECT_EQ(s.str(), "[2, 3, 4]");
  EXPECT_EQ(Shape{}.numel(), 1);
  EXPECT_THROW((Shape{1, 2, 3, 4, 5}), Error);
  EXPECT_THROW((Shape{2, -1}), Error);
}

TEST(Tensor, FromAndToVectorRoundTrip) {
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  Tensor t = Tensor::from({2, 3}, v);
  EXPECT_EQ(t.to_vector(), v);
  EXPECT_EQ(t.nbytes(), 24);
  EXPECT_EQ(t.item(4), 5.0f);
  EXPECT_THROW(Tensor::from({2, 2}, v), Error);
}

TEST(Tensor, NarrowAndChunkAreViews) {
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  Tensor t = Tensor::from({4, 3}, v);
  Tensor mid = t.narrow(1, 2);
  EXPECT_TRUE(mid.same_storage(t));
  EXPECT_EQ(mid.shape(), (Shape{2, 3}));
  EXPECT_EQ(mid.to_vector(), (std::vector<float>{3, 4, 5, 6, 7, 8}));
  mid.data<float>()[0] = 100;
  EXPECT_EQ(t.item(3), 100);
  auto parts = t.chunk(2);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].item(0), 6);
  EXPECT_THROW(t.chunk(3), Error);
  EXPECT_THROW(t.narrow(3, 2), Error);
}

TEST(Tensor, ReshapeSharesAndCloneCopies) {
  Tensor t = Tensor::full({2, 6}, 1.5f);
  Tensor r = t.reshape({3, 4});
  EXPECT_TRUE(r.same_storage(t));
  EXPECT_THROW(t.reshape({5}), Error);
  Tensor c = t.clone();
  EXPECT_FALSE(c.same_storage(t));
  c.fill(2);
  EXPECT_EQ(t.item(0), 1.5f);
  Tensor rows = Tensor::zeros({2, 3, 4}).rows(2, 3);
  EXPECT_EQ(rows.shape(), (Shape{3, 4}));
}

TEST(Tensor, DtypeConversionAndChecks) {
  Tensor t = Tensor::from({3}, std::vector<float>{1.0f, 1.00390625f, -2.5f});
  Tensor b = t.to(DType::bf16);
  EXPECT_EQ(b.dtype(), DType::bf16);
  EXPECT_EQ(b.nbytes(), 6);
  // 1 + 2^-8 is a tie between bf16 neighbours 1 and 1 + 2^-7: rounds to even (1).
  EXPECT_EQ(b.to_vector(), (std::vector<float>{1.0f, 1.0f, -2.5f}));
  EXPECT_THROW(b.data<float>(), Error);
  EXPECT_THROW(t.bf16_data(), Error);
  Tensor p = Tensor::zeros({5}, DType::e2m1);
  EXPECT_EQ(p.nbytes(), 3);
}

TEST(Tensor, UndefinedTensorUseIsAnError) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_THROW(t.raw(), Error);
}

TEST(Device, ParseAndPrint) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cuda:3"), Device::cuda(3));
  EXPECT_EQ(Device::cuda(1).str(), "cuda:1");
  EXPECT_THROW(Device::parse("gpu"), Error);
  EXPECT_THROW(Device::parse("cuda:x"), Error);
}

TEST(Error, CheckFormatsMessageAndLocation) {
  try {
    WEFT_CHECK(1 + 1 == 3, "world size {} is not divisible by tp*gtp = {}", 6, 4);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "world size 6 is not divisible by tp*gtp = 4");
    EXPECT_NE(e.where().find("tensor_test.cpp:"), std::string::npos);
  }
}

TEST(Error, FormatPrintsVectorsAsLists) {
  EXPECT_EQ(format("ranks {} of {}", std::vector<int>{0, 4}, std::vector<int>{}),
            "ranks [0,4] of []");
  EXPECT_EQ(format("{}", std::vector<std::vector<int>>{{0, 1}, {2, 3}}), "[[0,1],[2,3]]");
}

// fmt's syntax (the format string is checked against the arguments when
// compiled: a stray "{" or a missing argument does not build) and weft's types.
TEST(Error, FormatTakesFmtSpecsAndWeftTypes) {
  EXPECT_EQ(format("loss {:.4f}, {:>5}|{:<3}|", 3.14159, "ab", 7), "loss 3.1416,    ab|7  |");
  EXPECT_EQ(format("{} on {}", Shape{2, 3}, Device::cpu()), "[2, 3] on cpu");
  EXPECT_EQ(format("{{literal}} {}", 1), "{literal} 1");
}

TEST(Memory, CountsLiveAndPeakPerTag) {
  MemoryTracker tracker;
  ScopedMemoryTracker scope(tracker);
  {
    Tensor a = Tensor::empty({256}, DType::f32, Device::cpu(), MemoryTag::params);
    {
      ScopedMemoryTag tag(MemoryTag::activations);
      Tensor b = Tensor::empty({128});
      EXPECT_EQ(tracker.tag(Device::cpu(), MemoryTag::activations).live, 512);
      EXPECT_EQ(tracker.device(Device::cpu()).live, 1536);
    }
    EXPECT_EQ(tracker.device(Device::cpu()).live, 1024);
    EXPECT_EQ(tracker.device(Device::cpu()).peak, 1536);
    EXPECT_EQ(tracker.tag(Device::cpu(), MemoryTag::params).live, 1024);
    // Views allocate nothing.
    Tensor v = a.narrow(0, 10);
    EXPECT_EQ(tracker.device(Device::cpu()).live, 1024);
  }
  EXPECT_EQ(tracker.device(Device::cpu()).live, 0);
  EXPECT_EQ(tracker.tag(Device::cpu(), MemoryTag::activations).peak, 512);
  tracker.reset_peaks();
  EXPECT_EQ(tracker.device(Device::cpu()).peak, 0);
}

TEST(Memory, FreeOnAnotherThreadCreditsTheAllocatingTracker) {
  MemoryTracker mine;
  Tensor t;
  {
    ScopedMemoryTracker scope(mine);
    t = Tensor::empty({100});
  }
  EXPECT_EQ(mine.device(Device::cpu()).live, 400);
  std::thread([moved = std::move(t)]() mutable { moved = Tensor(); }).join();
  EXPECT_EQ(mine.device(Device::cpu()).live, 0);
}

TEST(Memory, HandsAFreedLargeBlockToTheNextRequestOfItsSize) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer builds keep no freed blocks";
#endif
  MemoryTracker tracker;
  ScopedMemoryTracker scope(tracker);
  const int64_t n = (3 << 20) / 4 + 7;  // about 3 MiB
  const void* first = nullptr;
  {
    Tensor a = Tensor::empty({n});
    first = a.raw();
  }
  EXPECT_EQ(tracker.device(Device::cpu()).live, 0);
  Tensor b = Tensor::empty({n});
  EXPECT_EQ(b.raw(), first);
  EXPECT_EQ(tracker.device(Device::cpu()).live, n * 4);
  // A block in use is never handed out twice, and small blocks are not kept.
  Tensor c = Tensor::empty({n});
  EXPECT_NE(c.raw(), b.raw());
  std::vector<float> ones(static_cast<size_t>(n), 1.0f);
  Tensor d = Tensor::from({n}, ones);
  EXPECT_EQ(d.to_vector(), ones);
}

TEST(Memory, CudaAllocationWithoutAGpuIsAClearError) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  try {
    Tensor::empty({4}, DType::f32, Device::cuda(0));
    FAIL() << "no throw";
  } catch (const Error& e) {
    // "no CUDA support" in a build without CUDA, the runtime's reason in one with it.
    EXPECT_NE(std::string(e.what()).find(cuda::unavailable_reason()), std::string::npos)
        << e.what();
  }
}

TEST(Threads, PerThreadOverrideAndRankShare) {
  int cores = available_cores();
  EXPECT_GE(cores, 1);
  set_ranks_in_process(1);
  if (!std::getenv("WEFT_NUM_THREADS") && !std::getenv("OMP_NUM_THREADS")) {
    EXPECT_EQ(num_threads(), cores);
  }
  const int default_threads = num_threads();
  const int override_threads = default_threads + 2;
  set_num_threads(override_threads);
  EXPECT_EQ(num_threads(), override_threads);
  {
    // A scoped count puts back the override it found.
    const ScopedNumThreads one(1);
    EXPECT_EQ(num_threads(), 1);
  }
  EXPECT_EQ(num_threads(), override_threads);
  // The override belongs to this thread: another thread keeps the default.
  int other = 0;
  std::thread([&] { other = num_threads(); }).join();
  EXPECT_EQ(other, default_threads);
  set_num_threads(0);
  set_ranks_in_process(cores * 4);
  if (!std::getenv("WEFT_NUM_THREADS") && !std::getenv("OMP_NUM_THREADS")) {
    EXPECT_EQ(num_threads(), 1);
  }
  set_ranks_in_process(1);
  EXPECT_THROW(set_num_threads(-1), Error);
}

}  // namespace
}  // namespace weft
