// The GEMM schedules on the local backend at 1, 2 and 4 ranks: each against
// the plain product computed on every rank, the bias rule (once, after any
// reduction), and the calls a schedule refuses.
#include "weft/parallel/schedule.h"

#include <gtest/gtest.h>

#include "testing.h"
#include "weft/comm/local.h"
#include "weft/kernels/activation.h"
#include "weft/parallel/mappings.h"

namespace weft::parallel {
namespace {

using weft::testing::close;
using weft::testing::error_of;
using weft::testing::kF32;
using weft::testing::random_tensor;

const ExecContext& ec() { return ExecContext::host(); }

// a (rows, k) · bᵀ with b (n, k), plus the bias: the plain product.
Tensor product(const Tensor& a, const Tensor& b, const Tensor& bias) {
  Tensor c = Tensor::empty({a.size(0), b.size(0)});
  kernels::gemm(ec(), a, b, c, {.trans_b = true, .bias = &bias});
  return c;
}

class Schedules : public ::testing::TestWithParam<int> {};

TEST_P(Schedules, EachEqualsThePlainProductWithTheBiasOnce) {
  comm::run_local(GetParam(), [](comm::ProcessGroup& g) {
    const int64_t n = g.size(), r = g.rank();
    const Tensor b = random_tensor({6, 8}, 1), bias = random_tensor({6}, 2);
    const Tensor full = random_tensor({4 * n, 8}, 3);  // every rank's rows, the same everywhere
    const Tensor mine = full.narrow(r * 4, 4).clone();
    GemmWorkspace ws;
    const kernels::GemmOptions opt{.trans_b = true, .bias = &bias};
    // all-gather then GEMM: this rank's rows in, every rank's rows out.
    Tensor y = Tensor::empty({4 * n, 6});
    ScheduledGemm run = scheduled_gemm(
        ec(), {.schedule = Schedule::all_gather_gemm, .group = &g, .options = opt}, mine, b, y, ws);
    EXPECT_TRUE(close(product(full, b, bias), y, kF32, 1.0));
    if (n > 1) {
      EXPECT_TRUE(close(full, run.gathered, kF32, 1.0));
    }
    // GEMM then reduce-scatter: every rank's partial product of all rows, this
    // rank's rows of the sum out, the bias added once.
    Tensor part = Tensor::empty({4, 6});
    scheduled_gemm(ec(), {.schedule = Schedule::gemm_reduce_scatter, .group = &g, .options = opt},
                   full, b, part, ws);
    Tensor expect = Tensor::empty({4 * n, 6});
    kernels::gemm(ec(), full, b, expect, {.trans_b = true, .alpha = static_cast<float>(n)});
    kernels::bias_add(ec(), expect, bias);
    EXPECT_TRUE(close(expect.narrow(r * 4, 4).clone(), part, kF32, 1.0));
    // GEMM then all-reduce, left in flight.
    Tensor all = Tensor::empty({4 * n, 6});
    ScheduledGemm pending = scheduled_gemm(ec(),
                                           {.schedule = Schedule::gemm_all_reduce,
                                            .group = &g,
                                            .options = {.trans_b = true},
                                            .async = true},
                                           full, b, all, ws);
    pending.pending.wait(ec());
    kernels::bias_add(ec(), all, bias);
    EXPECT_TRUE(close(expect, all, kF32, 1.0));
  });
}

TEST(ScheduleErrors, RefusedCalls) {
  comm::run_local(2, [](comm::ProcessGroup& g) {
    const Tensor a = Tensor::zeros({4, 8}), b = Tensor::zeros({6, 8}), bias = Tensor::zeros({6});
    Tensor out = Tensor::empty({2, 6});
    GemmWorkspace ws;
    std::string err = error_of([&] {
      scheduled_gemm(ec(),
                     {.schedule = Schedule::gemm_reduce_scatter,
                      .group = &g,
                      .options = {.trans_b = true, .bias = &bias},
                      .async = true},
                     a, b, out, ws);
    });
    EXPECT_NE(err.find("after the reduction"), std::string::npos) << err;
    err = error_of([&] {
      scheduled_gemm(ec(),
                     {.schedule = Schedule::gemm_reduce_scatter,
                      .group = &g,
                      .options = {.trans_b = true, .accumulate = true}},
                     a, b, out, ws);
    });
    EXPECT_NE(err.find("cannot accumulate"), std::string::npos) << err;
    err = error_of([&] {
      Tensor y = Tensor::empty({4, 6});
      scheduled_gemm(ec(), {.options = {.trans_b = true}}, a, b.to(DType::bf16), y, ws);
    });
    EXPECT_NE(err.find("gemm_input"), std::string::npos) << err;
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, Schedules, ::testing::Values(1, 2, 4),
                         [](const auto& p) { return "world" + std::to_string(p.param); });

}  // namespace
}  // namespace weft::parallel
