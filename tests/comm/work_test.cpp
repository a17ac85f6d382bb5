// The Work handle over its implementations, and the group observer that
// tests and tracing use to see when operations are issued, waited on and
// completed.
#include "weft/comm/work.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "weft/comm/local.h"
#include "weft/core/error.h"
#include "weft/core/exec_context.h"

namespace weft::comm {
namespace {

// An implementation that only counts how the handle calls it.
class Counting final : public Work::Impl {
 public:
  mutable int waits = 0, timed_waits = 0;
  bool completed() const override { return true; }
  void wait() const override { ++waits; }
  void wait_for(std::chrono::milliseconds) const override { ++timed_waits; }
  std::exception_ptr error() const override { return nullptr; }
  std::string what() const override { return "counting"; }
};

TEST(Work, HandleForwardsToItsImplementation) {
  auto impl = std::make_shared<Counting>();
  const Work w(impl);
  const Work copy = w;
  EXPECT_TRUE(copy.is_completed());
  EXPECT_EQ(copy.what(), "counting");
  copy.wait();
  w.wait(std::chrono::milliseconds(5));
  // A host implementation orders a context by waiting.
  w.wait(ExecContext::host());
  EXPECT_EQ(impl->waits, 2);
  EXPECT_EQ(impl->timed_waits, 1);
}

TEST(Work, DefaultConstructedIsComplete) {
  const Work w;
  EXPECT_TRUE(w.is_completed());
  EXPECT_EQ(w.error(), nullptr);
  EXPECT_EQ(w.what(), "");
  w.wait();
  w.wait(std::chrono::milliseconds(1));
  w.wait(ExecContext::host());
  wait_all({w, w});
}

// "issued all_gather #0"
std::string describe(const CommEvent& e) {
  return format("{} {} #{}", comm_event_kind_name(e.kind), op_kind_name(e.op), e.index);
}

// The nn layers' proof that a backward re-gather is in flight while a GEMM
// runs rests on this order: both operations are issued before either is
// waited on, and each wait is bracketed on the caller's thread.
TEST(LocalBackend, ObserverSeesIssueAndWaitOrder) {
  run_local(2, [](ProcessGroup& world) {
    world.set_timeout(std::chrono::seconds(60));
    std::mutex mu;
    std::vector<std::string> on_caller, on_worker, whats;
    const auto caller = std::this_thread::get_id();
    world.set_observer([&](const CommEvent& e) {
      std::lock_guard lock(mu);
      (std::this_thread::get_id() == caller ? on_caller : on_worker).push_back(describe(e));
      whats.push_back(e.what);
    });
    const int me = world.rank();
    Tensor in = Tensor::full({2, 3}, static_cast<float>(me + 1)), out = Tensor::zeros({4, 3});
    Tensor rs_in = Tensor::full({4, 3}, 1.0f), rs_out = Tensor::zeros({2, 3});
    Work ag = world.all_gather(out, in);
    Work rs = world.reduce_scatter(rs_out, rs_in);
    ag.wait();
    rs.wait();
    world.set_observer(nullptr);
    world.barrier().wait();  // reported to nobody

    std::lock_guard lock(mu);
    EXPECT_EQ(on_caller, (std::vector<std::string>{
                             "issued all_gather #0", "issued reduce_scatter #1",
                             "wait_begin all_gather #0", "wait_end all_gather #0",
                             "wait_begin reduce_scatter #1", "wait_end reduce_scatter #1"}))
        << "rank " << me;
    // Completions come from the group's worker, in issue order, each before
    // the wait on it returned.
    EXPECT_EQ(on_worker,
              (std::vector<std::string>{"completed all_gather #0", "completed reduce_scatter #1"}))
        << "rank " << me;
    for (const std::string& w : whats)
      EXPECT_NE(w.find("on group 'world'"), std::string::npos) << w;
    EXPECT_EQ(out.item(11), 2.0f);
    EXPECT_EQ(rs_out.item(0), 2.0f);
  });
}

TEST(LocalBackend, ObserverSeesTheEndOfAWaitThatThrows) {
  using K = CommEvent::Kind;
  std::atomic<bool> timed_out{false};
  run_local(2, [&](ProcessGroup& world) {
    world.set_timeout(std::chrono::seconds(60));
    Tensor t = Tensor::full({4}, 1.0f);
    if (world.rank() == 1) {
      // Joins only once rank 0's short wait has given up.
      while (!timed_out.load()) std::this_thread::yield();
      world.all_reduce(t).wait();
      return;
    }
    std::vector<K> kinds;
    world.set_observer([&](const CommEvent& e) {
      if (e.kind != K::completed) kinds.push_back(e.kind);
    });
    Work w = world.all_reduce(t);
    EXPECT_THROW(w.wait(std::chrono::milliseconds(20)), Error);
    timed_out = true;
    w.wait();
    world.set_observer(nullptr);
    EXPECT_EQ(kinds,
              (std::vector<K>{K::issued, K::wait_begin, K::wait_end, K::wait_begin, K::wait_end}));
    EXPECT_EQ(t.item(0), 2.0f);
  });
}

}  // namespace
}  // namespace weft::comm
