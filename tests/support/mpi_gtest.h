// Running gtest under mpirun: every rank runs every test, rank 0 prints the
// gtest report, other ranks print only their failures ("[rank N] file:line:
// message"), and every rank exits with the same status (failures are
// all-reduced over the world). Header-only: a test main registers its cases
// with register_test and returns run_tests(world).
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>
#include <utility>

#include "weft/comm/process_group.h"
#include "weft/comm/world.h"

namespace weft::testing {

// A test whose body is a function (for tests registered at run time).
class FunctionTest : public ::testing::Test {
 public:
  explicit FunctionTest(std::function<void()> body) : body_(std::move(body)) {}
  void TestBody() override { body_(); }

 private:
  std::function<void()> body_;
};

// Registers `body` as the test suite.name.
inline void register_test(const std::string& suite, const std::string& name,
                          std::function<void()> body, const char* file = __FILE__,
                          int line = __LINE__) {
  ::testing::RegisterTest(
      suite.c_str(), name.c_str(), nullptr, nullptr, file, line,
      [body = std::move(body)]() -> ::testing::Test* { return new FunctionTest(body); });
}

// Prints a rank's failures to stderr, prefixed with the rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed()) {
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
    }
  }

 private:
  int rank_;
};

// Whether this process was started by mpirun; if not, prints how to run it.
inline bool require_mpirun(const char* argv0) {
  if (comm::launched_by_mpi()) return true;
  std::fprintf(stderr, "run me under mpirun, e.g. mpirun --oversubscribe -np 4 %s\n", argv0);
  return false;
}

// RUN_ALL_TESTS on every rank of `world` (after InitGoogleTest); returns 0
// when every rank passed, 1 otherwise, the same on every rank.
inline int run_tests(comm::ProcessGroup& world) {
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (world.rank() != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(world.rank()));
  }
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  Tensor flag = Tensor::full({1}, static_cast<float>(failed));
  world.all_reduce(flag, comm::ReduceOp::max).wait();
  const int status = flag.item(0) != 0.0f ? 1 : 0;
  if (world.rank() == 0 && status != 0) {
    std::fprintf(stderr, "some rank failed a test (see the [rank N] lines)\n");
  }
  return status;
}

}  // namespace weft::testing
