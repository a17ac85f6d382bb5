// The hybrid group (comm/hybrid.h) on host backends: host tensors go to the
// host group, the group takes the host group's name, ranks and timeout,
// splits split both halves, and mismatched halves are refused. Routing GPU
// tensors to the device group is covered by gpu-check (nccl under mpirun).
#include "weft/comm/hybrid.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "testing.h"
#include "weft/comm/local.h"

namespace weft::comm {
namespace {

TEST(HybridGroup, HostTensorsGoToTheHostGroupAndSplitsSplitBoth) {
  run_local(2, [](ProcessGroup& world) {
    std::shared_ptr<ProcessGroup> device = world.new_subgroups_by_enumeration({{0, 1}}, "dev");
    std::shared_ptr<ProcessGroup> host = world.new_subgroups_by_enumeration({{0, 1}}, "host");
    host->set_timeout(std::chrono::milliseconds(12345));
    std::shared_ptr<ProcessGroup> hybrid = hybrid_group(device, host);
    EXPECT_EQ(hybrid->name(), "host");
    EXPECT_EQ(hybrid->backend(), "local+local");
    EXPECT_EQ(hybrid->rank(), world.rank());
    EXPECT_EQ(hybrid->size(), 2);
    EXPECT_EQ(hybrid->timeout(), std::chrono::milliseconds(12345));
    EXPECT_TRUE(hybrid->device().is_cpu());
    // Which half ran an operation: the half's observer sees it complete.
    std::atomic<int> on_host{0}, on_device{0};
    host->set_observer([&](const CommEvent& e) {
      if (e.kind == CommEvent::Kind::completed) ++on_host;
    });
    device->set_observer([&](const CommEvent& e) {
      if (e.kind == CommEvent::Kind::completed) ++on_device;
    });

    Tensor t = Tensor::full({3}, static_cast<float>(world.rank() + 1));
    hybrid->all_reduce(t).wait();
    EXPECT_EQ(t.to_vector(), std::vector<float>(3, 3.0f));
    hybrid->barrier().wait();
    EXPECT_EQ(on_host.load(), 2);
    EXPECT_EQ(on_device.load(), 0);
    EXPECT_EQ(hybrid->stats().count(OpKind::all_reduce), 1);
    host->set_observer({});
    device->set_observer({});

    std::shared_ptr<ProcessGroup> alone =
        hybrid->new_subgroups_by_enumeration({{0}, {1}}, "alone");
    ASSERT_TRUE(alone);
    EXPECT_EQ(alone->size(), 1);
    EXPECT_EQ(alone->backend(), "local+local");
    Tensor u = Tensor::full({2}, 5.0f);
    alone->all_reduce(u).wait();
    EXPECT_EQ(u.to_vector(), std::vector<float>(2, 5.0f));
  });
}

TEST(HybridGroup, HalvesWithDifferentRanksAreRefused) {
  run_local(2, [](ProcessGroup& world) {
    std::shared_ptr<ProcessGroup> both = world.new_subgroups_by_enumeration({{0, 1}}, "both");
    std::shared_ptr<ProcessGroup> reversed =
        world.new_subgroups_by_enumeration({{1, 0}}, "reversed");
    const std::string e = testing::error_of([&] { hybrid_group(both, reversed); });
    EXPECT_NE(e.find("must hold the same ranks in the same order"), std::string::npos) << e;
    EXPECT_NE(testing::error_of([&] { hybrid_group(nullptr, both); }), "");
  });
}

}  // namespace
}  // namespace weft::comm
