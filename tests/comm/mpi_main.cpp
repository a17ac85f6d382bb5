// The collective suite on the mpi backend: run under mpirun (ctest does it
// with `mpirun --oversubscribe -np 4`). Every rank runs every case; rank 0
// prints the gtest report, other ranks print their failures prefixed with
// their rank, and all ranks exit with the same status.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "collective_cases.h"
#include "weft/comm/mpi.h"
#include "weft/comm/world.h"

namespace {

using weft::comm::ProcessGroup;

class CaseTest : public ::testing::Test {
 public:
  CaseTest(ProcessGroup* world, void (*run)(ProcessGroup&)) : world_(world), run_(run) {}
  void TestBody() override { run_(*world_); }

 private:
  ProcessGroup* world_;
  void (*run_)(ProcessGroup&);
};

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!weft::comm::launched_by_mpi()) {
    std::fprintf(stderr, "run me under mpirun, e.g. mpirun --oversubscribe -np 4 %s\n", argv[0]);
    return 2;
  }
  int status = 1;
  {
    auto world = weft::comm::mpi_world();
    world->set_timeout(std::chrono::seconds(60));
    for (const auto& c : weft::comm::testing::collective_cases()) {
      ::testing::RegisterTest(
          "MpiCollectives", c.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
          [w = world.get(), run = c.run]() -> ::testing::Test* { return new CaseTest(w, run); });
    }
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    if (world->rank() != 0) {
      delete listeners.Release(listeners.default_result_printer());
      listeners.Append(new RankFailurePrinter(world->rank()));
    }
    int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
    weft::Tensor flag = weft::Tensor::full({1}, static_cast<float>(failed));
    world->all_reduce(flag, weft::comm::ReduceOp::max).wait();
    status = flag.item(0) != 0.0f ? 1 : 0;
    if (world->rank() == 0 && status != 0)
      std::fprintf(stderr, "some rank failed a test (see the [rank N] lines)\n");
  }
  return status;
}
