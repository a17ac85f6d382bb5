// The collective suite on the local backend, and what only the local backend
// can show in-process: failures of one rank reaching the others.
#include "weft/comm/local.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "collective_cases.h"
#include "weft/comm/world.h"
#include "weft/core/error.h"
#include "weft/core/threads.h"

namespace weft::comm {
namespace {

using testing::collective_cases;
using testing::CommCase;

class LocalCollectives : public ::testing::TestWithParam<std::tuple<CommCase, int>> {};

TEST_P(LocalCollectives, Run) {
  const auto& [c, n] = GetParam();
  if (!c.runs_on(n))
    GTEST_SKIP() << c.name << " needs a world of at least " << c.worlds.min_world
                 << " ranks, a multiple of " << c.worlds.multiple_of;
  run_local(n, [&](ProcessGroup& world) {
    world.set_timeout(std::chrono::seconds(60));
    c.run(world);
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, LocalCollectives,
                         ::testing::Combine(::testing::ValuesIn(collective_cases()),
                                            ::testing::Values(1, 2, 3, 4, 8)),
                         [](const auto& param_info) {
                           return std::get<0>(param_info.param).name + "_world" +
                                  std::to_string(std::get<1>(param_info.param));
                         });

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Runs fn on n ranks and collects each rank's error message ("" if none).
std::vector<std::string> rank_errors(int n, const std::function<void(ProcessGroup&)>& fn,
                                     std::string* first_error) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  try {
    run_local(n, [&](ProcessGroup& world) {
      try {
        fn(world);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(world.rank())] = e.what();
        throw;
      }
    });
    ADD_FAILURE() << "run_local did not rethrow";
  } catch (const std::exception& e) {
    *first_error = e.what();
  }
  return errors;
}

TEST(LocalFaults, RankThatThrowsAbortsTheOthers) {
  std::string first;
  auto errors = rank_errors(
      4,
      [](ProcessGroup& world) {
        world.set_timeout(std::chrono::seconds(120));
        if (world.rank() == 2) throw Error("boom");
        Tensor t = Tensor::zeros({16});
        world.all_reduce(t).wait();
      },
      &first);
  EXPECT_EQ(first, "boom");
  for (int r : {0, 1, 3}) {
    EXPECT_TRUE(contains(errors[static_cast<size_t>(r)], "rank 2 failed: boom"))
        << errors[static_cast<size_t>(r)];
    EXPECT_TRUE(contains(errors[static_cast<size_t>(r)], "all_reduce"))
        << errors[static_cast<size_t>(r)];
  }
}

TEST(LocalFaults, RankThatNeverArrivesTimesOut) {
  std::string first;
  auto errors = rank_errors(
      4,
      [](ProcessGroup& world) {
        world.set_timeout(std::chrono::milliseconds(300));
        Tensor t = Tensor::zeros({16});
        world.all_reduce(t).wait();  // everybody
        if (world.rank() == 3) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));
          return;
        }
        world.all_reduce(t).wait();
      },
      &first);
  EXPECT_TRUE(contains(first, "timed out")) << first;
  EXPECT_TRUE(contains(first, "all_reduce #1 on group 'world'")) << first;
  EXPECT_TRUE(contains(first, "ranks [3] did not arrive")) << first;
  EXPECT_EQ(errors[3], "");
}

TEST(LocalFaults, RankThatLeavesEndsTheWait) {
  std::string first;
  auto errors = rank_errors(
      3,
      [](ProcessGroup& world) {
        world.set_timeout(std::chrono::seconds(120));
        if (world.rank() == 1) return;
        world.barrier().wait();
      },
      &first);
  EXPECT_TRUE(contains(first, "left the group")) << first;
  EXPECT_TRUE(contains(first, "[1]")) << first;
}

// Rank 3 fails before its pair's all_reduce: rank 2, waiting in that pair,
// fails with rank 3's error long before its timeout.
TEST(LocalFaults, SubgroupOperationsFailWhenAnyRankFails) {
  std::string first;
  const auto start = std::chrono::steady_clock::now();
  auto errors = rank_errors(
      4,
      [](ProcessGroup& world) {
        auto pair = world.new_subgroups_by_enumeration({{0, 1}, {2, 3}}, "pair");
        pair->set_timeout(std::chrono::seconds(60));
        if (world.rank() == 3) throw Error("rank 3 gives up");
        Tensor t = Tensor::zeros({4});
        pair->all_reduce(t).wait();
      },
      &first);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(first, "rank 3 gives up");
  // Rank 2 learns of it either from the world's failure or, when rank 3's
  // pair group is destroyed while its exception unwinds, from rank 3 leaving.
  EXPECT_TRUE(contains(errors[2], "rank 3 failed: rank 3 gives up") ||
              contains(errors[2], "(world ranks [3]) left the group"))
      << errors[2];
  // The other pair completes unless the failure reaches it first (the whole
  // world fails with its first error); either way no rank hangs.
  for (int r : {0, 1}) {
    EXPECT_TRUE(errors[static_cast<size_t>(r)].empty() ||
                contains(errors[static_cast<size_t>(r)], "rank 3 failed: rank 3 gives up"))
        << errors[static_cast<size_t>(r)];
  }
}

TEST(LocalFaults, ShortWaitNamesTheRanksThatHaveNotArrived) {
  run_local(2, [](ProcessGroup& world) {
    Tensor t = Tensor::zeros({4});
    if (world.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      world.all_reduce(t).wait();
      return;
    }
    Work w = world.all_reduce(t);
    try {
      w.wait(std::chrono::milliseconds(20));
      ADD_FAILURE() << "the short wait did not time out";
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.what(), "did not complete within 0.02 s")) << e.what();
      EXPECT_TRUE(contains(e.what(), "ranks [1] did not arrive")) << e.what();
    }
    w.wait();
  });
}

TEST(LocalBackend, EachRankHasItsOwnMemoryTrackerAndShareOfCores) {
  std::mutex mu;
  std::vector<const MemoryTracker*> trackers;
  run_local(3, [&](ProcessGroup& world) {
    EXPECT_EQ(ranks_in_process(), 3);
    if (!std::getenv("WEFT_NUM_THREADS") && !std::getenv("OMP_NUM_THREADS")) {
      EXPECT_EQ(num_threads(), std::max(1, available_cores() / 3));
    }
    Tensor t = Tensor::zeros({1000});
    EXPECT_GE(MemoryTracker::current().device(Device::cpu()).live, 4000);
    std::lock_guard lock(mu);
    trackers.push_back(&MemoryTracker::current());
    (void)world;
  });
  ASSERT_EQ(trackers.size(), 3u);
  EXPECT_NE(trackers[0], trackers[1]);
  EXPECT_NE(trackers[1], trackers[2]);
  EXPECT_NE(trackers[0], &MemoryTracker::process());
  EXPECT_EQ(ranks_in_process(), 1);
}

TEST(LocalBackend, InitWorldOutsideMpirunIsOneRank) {
  auto world = init_world();
  EXPECT_EQ(world->size(), 1);
  EXPECT_EQ(world->backend(), "local");
  Tensor t = Tensor::full({3}, 2.0f);
  world->all_reduce(t, ReduceOp::avg).wait();
  EXPECT_EQ(t.item(2), 2.0f);
}

TEST(LocalBackend, RunLocalRejectsZeroRanks) {
  EXPECT_THROW(run_local(0, [](ProcessGroup&) {}), Error);
}

TEST(Timeout, DefaultAndEnvironment) {
  unsetenv("WEFT_COMM_TIMEOUT");
  EXPECT_EQ(default_timeout(), std::chrono::seconds(300));
  setenv("WEFT_COMM_TIMEOUT", "2.5", 1);
  EXPECT_EQ(default_timeout(), std::chrono::milliseconds(2500));
  setenv("WEFT_COMM_TIMEOUT", "soon", 1);
  EXPECT_THROW(default_timeout(), Error);
  unsetenv("WEFT_COMM_TIMEOUT");
}

// Argument errors are raised on the calling thread, before anything is queued.
TEST(Arguments, BadCallsSayWhatIsWrong) {
  auto world = init_world();
  auto message = [](const std::function<void()>& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Tensor f = Tensor::zeros({4, 2}), b = Tensor::zeros({4, 2}, DType::bf16);
  EXPECT_TRUE(
      contains(message([&] {
                 world->all_gather(Tensor::zeros({5, 2}), f);
               }),
               "must be the input shape [4, 2] with dimension 0 multiplied by the group size 1"));
  EXPECT_TRUE(
      contains(message([&] { world->all_reduce(f, b); }), "output is f32 but the input is bf16"));
  EXPECT_TRUE(contains(message([&] { world->all_reduce(Tensor::zeros({4}, DType::i32)); }),
                       "needs f32 or bf16"));
  EXPECT_TRUE(contains(message([&] { world->broadcast(f, 3); }), "root rank 3 is not in [0, 1)"));
  EXPECT_TRUE(contains(message([&] { world->send(f, 0); }), "cannot be its own destination"));
  EXPECT_TRUE(contains(message([&] { world->all_reduce(f.narrow(0, 3), f.narrow(1, 3)); }),
                       "partly overlaps"));
  EXPECT_TRUE(contains(message([&] { world->all_reduce(Tensor()); }), "undefined"));
  EXPECT_TRUE(contains(message([&] {
                         world->new_subgroups_by_enumeration({{0}, {0}}, "x");
                       }),
                       "must be disjoint"));
  EXPECT_TRUE(contains(message([&] { world->new_subgroups_by_enumeration({{1}}, "x"); }),
                       "rank 1 in list 0 is not a rank of group 'world'"));
  EXPECT_TRUE(contains(message([&] { world->set_timeout(std::chrono::milliseconds(0)); }),
                       "must be positive"));
}

}  // namespace
}  // namespace weft::comm
