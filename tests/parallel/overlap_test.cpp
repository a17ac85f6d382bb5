// The comm-GEMM overlap algorithms against the plain schedules, on the local
// backend at TP 2 and 4, f32 and bf16, with row blocks of 1 and of 5 rows (so
// that num_splits 1, 2, 3 and 8 divide some blocks and not others), and a
// bias added once.
#include "weft/parallel/overlap/overlap.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "testing.h"
#include "weft/comm/local.h"
#include "weft/core/profile.h"
#include "weft/parallel/schedule.h"

namespace weft::parallel {
namespace {

using weft::testing::close;
using weft::testing::kBF16;
using weft::testing::kF32;
using weft::testing::random_tensor;

const ExecContext& ec() { return ExecContext::host(); }

struct Case {
  int ranks;
  DType dtype;
  int64_t rows;  // per rank, dimension 0 of a (rows, 3, k) block
};

class Overlap : public ::testing::TestWithParam<Case> {};

// Runs `schedule` on the same inputs without and with `choice`, and compares.
void expect_same(comm::ProcessGroup& g, Schedule schedule, OverlapChoice choice, const Tensor& a,
                 const Tensor& b, const Shape& out_shape, const Tensor* bias, bool bf16) {
  GemmWorkspace plain_ws, overlap_ws;
  const kernels::GemmOptions opt{.trans_b = true, .bias = bias};
  Tensor want = Tensor::empty(out_shape, a.dtype());
  ScheduledGemm p = scheduled_gemm(ec(), {.schedule = schedule, .group = &g, .options = opt}, a, b,
                                   want, plain_ws);
  Tensor got = Tensor::empty(out_shape, a.dtype());
  ScheduledGemm o = scheduled_gemm(
      ec(), {.schedule = schedule, .group = &g, .options = opt, .overlap = choice, .name = "test"},
      a, b, got, overlap_ws);
  SCOPED_TRACE(format("{} {}:{}", schedule_name(schedule), overlap_method_name(choice.method),
                      choice.num_splits));
  // The same products, summed in the same order per element except for the
  // ring's order of ranks: f32 to docs/design.md's tolerance, bf16 to its rounding.
  EXPECT_TRUE(close(want.to(DType::f32), got.to(DType::f32), bf16 ? kBF16 : kF32, 4.0));
  if (p.gathered.defined()) {
    ASSERT_TRUE(o.gathered.defined());
    EXPECT_EQ(p.gathered.to_vector(), o.gathered.to_vector());  // kept for wgrad, exactly
  }
}

TEST_P(Overlap, EveryAlgorithmEqualsThePlainSchedule) {
  const Case c = GetParam();
  comm::run_local(c.ranks, [&](comm::ProcessGroup& g) {
    const int64_t p = g.size(), r = g.rank(), k = 16, n_out = 12;
    const bool bf16 = c.dtype == DType::bf16;
    const Tensor b = random_tensor({n_out, k}, 1).to(c.dtype);
    const Tensor bias = random_tensor({n_out}, 2);
    // Every rank's rows (the same on all ranks), and this rank's block.
    const Tensor all = random_tensor({p * c.rows, 3, k}, 3).to(c.dtype);
    const Tensor mine = all.narrow(r * c.rows, c.rows).clone();
    // A rank's own partial operand for the reductions: different per rank.
    const Tensor part =
        random_tensor({p * c.rows, 3, k}, 10 + static_cast<uint32_t>(r)).to(c.dtype);
    const Tensor part_rows = part.narrow(0, c.rows).clone();
    expect_same(g, Schedule::all_gather_gemm, {OverlapMethod::ring, 1}, mine, b,
                {p * c.rows, 3, n_out}, &bias, bf16);
    expect_same(g, Schedule::gemm_reduce_scatter, {OverlapMethod::ring, 1}, part, b,
                {c.rows, 3, n_out}, &bias, bf16);
    // Leaving cores to the transfers changes the GEMM's team, not the result.
    expect_same(g, Schedule::all_gather_gemm, {OverlapMethod::ring, 1, 1}, mine, b,
                {p * c.rows, 3, n_out}, &bias, bf16);
    expect_same(g, Schedule::gemm_reduce_scatter, {OverlapMethod::pipeline, 3, 2}, part, b,
                {c.rows, 3, n_out}, &bias, bf16);
    for (int splits : {1, 2, 3, 8}) {
      expect_same(g, Schedule::gemm_reduce_scatter, {OverlapMethod::pipeline, splits}, part, b,
                  {c.rows, 3, n_out}, &bias, bf16);
      expect_same(g, Schedule::gemm_all_reduce, {OverlapMethod::pipeline, splits}, part_rows, b,
                  {c.rows, 3, n_out}, &bias, bf16);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, Overlap,
                         ::testing::Values(Case{2, DType::f32, 5}, Case{4, DType::f32, 5},
                                           Case{2, DType::bf16, 5}, Case{4, DType::bf16, 5},
                                           Case{2, DType::f32, 1}, Case{4, DType::bf16, 1}),
                         [](const auto& i) {
                           return format("tp{}_{}_rows{}", i.param.ranks, dtype_name(i.param.dtype),
                                         i.param.rows);
                         });

// A method that does not apply runs the plain schedule and says so once.
TEST(OverlapFallback, SaysSoOnce) {
  comm::run_local(2, [](comm::ProcessGroup& g) {
    const Tensor a = random_tensor({4, 8}, 1), b = random_tensor({6, 8}, 2);
    Tensor out = Tensor::empty({4, 6});
    GemmWorkspace ws;
    for (int i = 0; i < 3; ++i) {
      scheduled_gemm(ec(),
                     {.schedule = Schedule::gemm_all_reduce,
                      .group = &g,
                      .options = {.trans_b = true},
                      .overlap = {OverlapMethod::ring, 1},
                      .name = "fc2_fprop"},
                     a, b, out, ws);
    }
  });
  int notes = 0;
  for (const std::string& n : overlap_fallback_notes()) {
    if (n.find("fc2_fprop=ring") != std::string::npos) ++notes;
  }
  EXPECT_EQ(notes, 1);
}

// The transfer of the next block is in flight while the present block
// multiplies: between each exchange's issue and the start of its wait, the
// calling thread spent time in GEMMs (the profile's gemm seconds grew): in
// ring order, issue i, GEMM i, wait i.
TEST(OverlapOrder, RingTransfersRunBesideTheGemms) {
  comm::run_local(2, [](comm::ProcessGroup& g) {
    const Tensor b = random_tensor({64, 64}, 1);
    const Tensor mine = random_tensor({64, 4, 64}, 2 + static_cast<uint32_t>(g.rank()));
    Tensor out = Tensor::empty({128, 4, 64});
    GemmWorkspace ws;
    struct Event {
      std::string what;
      double gemm_seconds;
    };
    std::vector<Event> events;
    g.set_observer([&](const comm::CommEvent& e) {
      if (e.kind == comm::CommEvent::Kind::completed) return;
      events.push_back(
          {format("{} {}", comm::comm_event_kind_name(e.kind), comm::op_kind_name(e.op)),
           profile::totals().gemm});
    });
    profile::reset();
    scheduled_gemm(ec(),
                   {.schedule = Schedule::all_gather_gemm,
                    .group = &g,
                    .options = {.trans_b = true},
                    .overlap = {OverlapMethod::ring, 1},
                    .name = "qkv_fprop"},
                   mine, b, out, ws);
    g.set_observer(nullptr);
    // One exchange at 2 ranks: issued, then the GEMM of the block present,
    // then the wait; the last block's GEMM follows.
    ASSERT_EQ(events.size(), 3u);
    EXPECT_EQ(events[0].what, "issued send_recv");
    EXPECT_EQ(events[1].what, "wait_begin send_recv");
    EXPECT_EQ(events[2].what, "wait_end send_recv");
    EXPECT_GT(events[1].gemm_seconds, events[0].gemm_seconds);  // a GEMM ran in between
    EXPECT_GT(profile::totals().gemm, events[2].gemm_seconds);  // and the last one after
  });
}

TEST(OverlapConfig, ParsesTransformerEngineDefaultsAndOverrides) {
  EXPECT_FALSE(OverlapConfig().enabled());
  EXPECT_EQ(OverlapConfig::parse("off").str(), "off");
  const OverlapConfig d = OverlapConfig::parse("on");
  EXPECT_EQ(d.choice("qkv_fprop").method, OverlapMethod::ring);
  EXPECT_EQ(d.choice("fc1_fprop").method, OverlapMethod::ring);
  EXPECT_EQ(d.choice("proj_dgrad").method, OverlapMethod::ring);
  EXPECT_EQ(d.choice("fc2_fprop").method, OverlapMethod::pipeline);
  EXPECT_EQ(d.choice("qkv_wgrad").method, OverlapMethod::bulk);
  const OverlapConfig o = OverlapConfig::parse("fc2_fprop=pipeline:8, qkv_fprop=off");
  EXPECT_EQ(o.choice("fc2_fprop"), (OverlapChoice{OverlapMethod::pipeline, 8}));
  EXPECT_EQ(o.choice("qkv_fprop").method, OverlapMethod::off);
  EXPECT_EQ(o.choice("fc1_fprop").method, OverlapMethod::ring);  // the default stays
  EXPECT_EQ(OverlapConfig::parse(o.str()).str(), o.str());
  std::string err = weft::testing::error_of([] { OverlapConfig::parse("fc3_fprop=ring"); });
  EXPECT_NE(err.find("unknown GEMM 'fc3_fprop'"), std::string::npos) << err;
  err = weft::testing::error_of([] { OverlapConfig::parse("fc2_fprop=fast"); });
  EXPECT_NE(err.find("use ring, pipeline, bulk or off"), std::string::npos) << err;
  err = weft::testing::error_of([] { OverlapConfig::parse("fc2_fprop=pipeline:0"); });
  EXPECT_NE(err.find("num_splits"), std::string::npos) << err;
}

TEST(OverlapConfig, CommCoresReachEveryChoiceAndRoundTrip) {
  EXPECT_EQ(OverlapConfig::parse("on").comm_cores(), 0);
  EXPECT_EQ(OverlapConfig::parse("on").choice("fc1_fprop").comm_cores, 0);
  const OverlapConfig c = OverlapConfig::parse("fc2_fprop=pipeline:8, comm_cores=1");
  EXPECT_EQ(c.comm_cores(), 1);
  EXPECT_EQ(c.choice("fc2_fprop"), (OverlapChoice{OverlapMethod::pipeline, 8, 1}));
  EXPECT_EQ(c.choice("qkv_fprop"), (OverlapChoice{OverlapMethod::ring, 4, 1}));
  EXPECT_NE(c.str().find(",comm_cores=1"), std::string::npos) << c.str();
  EXPECT_EQ(OverlapConfig::parse(c.str()).str(), c.str());
  EXPECT_EQ(OverlapConfig::parse("on").str().find("comm_cores"), std::string::npos);
  for (const char* bad : {"comm_cores=-1", "comm_cores=x", "comm_cores=2000", "comm_cores="}) {
    const std::string err = weft::testing::error_of([&] { OverlapConfig::parse(bad); });
    EXPECT_NE(err.find("comm_cores"), std::string::npos) << bad << ": " << err;
    EXPECT_NE(err.find("[0, 1024]"), std::string::npos) << bad << ": " << err;
  }
  OverlapConfig d;
  EXPECT_THROW(d.set_comm_cores(-1), Error);
}

TEST(OverlapConfig, GemmBesideCommLeavesCommCoresButAtLeastOne) {
  const ExecContext four(Device::cpu(), 4);
  EXPECT_EQ(overlap::beside_comm(four, 0).threads(), 4);
  EXPECT_EQ(overlap::beside_comm(four, 1).threads(), 3);
  EXPECT_EQ(overlap::beside_comm(four, 3).threads(), 1);
  EXPECT_EQ(overlap::beside_comm(four, 8).threads(), 1);
  EXPECT_EQ(overlap::beside_comm(ExecContext(Device::cpu(), 1), 1).threads(), 1);
}

}  // namespace
}  // namespace weft::parallel
