// The nccl backend on one GPU: a world of one rank, whose collectives return
// their inputs, which checks the plumbing (device pointers, in-place calls,
// coalesced groups, events, stream ordering, errors) rather than NCCL's
// arithmetic. Worlds of several ranks need several GPUs (mpirun).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cuda_testing.h"
#include "weft/comm/cuda/nccl.h"
#include "weft/comm/local.h"
#include "weft/comm/world.h"
#include "weft/core/error.h"
#include "weft/core/exec_context.h"

namespace weft::comm {
namespace {

using testing::gpu;
using testing::host;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// 0.5, 1.5, 2.5, ... (exact in bf16) as a tensor of `shape` on cuda:0.
Tensor ramp(const Shape& shape, DType dtype, float start = 0.5f) {
  std::vector<float> v(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return gpu(Tensor::from(shape, v, dtype));
}

void expect_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  EXPECT_EQ(got.dtype(), want.dtype()) << what;
  EXPECT_EQ(host(got).to_vector(), host(want).to_vector()) << what;
}

TEST(CudaNccl, WorldOfOneRunsEveryCollective) {
  WEFT_REQUIRE_GPU();
  auto world = nccl_world_of_one(0);
  EXPECT_EQ(world->backend(), "nccl");
  EXPECT_EQ(world->size(), 1);
  EXPECT_EQ(world->rank(), 0);
  for (DType dt : {DType::f32, DType::bf16, DType::f64, DType::i64}) {
    const std::string name(dtype_name(dt));
    const Tensor x = ramp({4, 3}, dt);
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
      const std::string what = name + " " + std::string(reduce_op_name(op));
      Tensor out = gpu(Tensor::zeros({4, 3}, dt));
      world->all_reduce(out, x, op).wait();
      expect_equal(out, x, "all_reduce out of place " + what);
      Tensor in_place = gpu(host(x));
      world->all_reduce(in_place, op).wait();
      expect_equal(in_place, x, "all_reduce in place " + what);
      Tensor scattered = gpu(Tensor::zeros({4, 3}, dt));
      world->reduce_scatter(scattered, x, op).wait();
      expect_equal(scattered, x, "reduce_scatter " + what);
    }
  }
  // Operations that move bytes take any dtype.
  for (DType dt : {DType::f32, DType::bf16, DType::i32, DType::u8}) {
    const std::string name(dtype_name(dt));
    const Tensor x = ramp({6, 2}, dt);
    Tensor gathered = gpu(Tensor::zeros({6, 2}, dt));
    world->all_gather(gathered, x).wait();
    expect_equal(gathered, x, "all_gather " + name);
    Tensor own = gpu(host(x));
    world->all_gather(own, own.chunk(1)[0]).wait();
    expect_equal(own, x, "all_gather in place " + name);
    Tensor copied = gpu(Tensor::zeros({6, 2}, dt));
    world->broadcast(copied, x, 0).wait();
    expect_equal(copied, x, "broadcast " + name);
    Tensor exchanged = gpu(Tensor::zeros({6, 2}, dt));
    world->all_to_all(exchanged, x).wait();
    expect_equal(exchanged, x, "all_to_all " + name);
    Tensor swapped = gpu(host(x));
    world->all_to_all(swapped, swapped).wait();
    expect_equal(swapped, x, "all_to_all in place " + name);
  }
  world->barrier().wait();
  const CommStats stats = world->stats();
  EXPECT_EQ(stats.count(OpKind::barrier), 1);
  EXPECT_EQ(stats.count(OpKind::all_reduce), 4 * 3 * 2);
}

TEST(CudaNccl, CoalescedCallsRunAsOneGroup) {
  WEFT_REQUIRE_GPU();
  auto world = nccl_world_of_one(0);
  const std::vector<Tensor> xs = {ramp({5}, DType::f32), ramp({2, 3}, DType::f32, 10.5f)};
  std::vector<Tensor> sums = {gpu(host(xs[0])), gpu(host(xs[1]))};
  Work w = world->all_reduce_coalesced(sums, ReduceOp::avg);
  w.wait();
  EXPECT_TRUE(contains(w.what(), "all_reduce_coalesced #0 on group 'world'")) << w.what();
  expect_equal(sums[0], xs[0], "all_reduce_coalesced 0");
  expect_equal(sums[1], xs[1], "all_reduce_coalesced 1");
  std::vector<Tensor> gathered = {gpu(Tensor::zeros({5})), gpu(Tensor::zeros({2, 3}))};
  world->all_gather_coalesced(gathered, xs).wait();
  expect_equal(gathered[0], xs[0], "all_gather_coalesced 0");
  expect_equal(gathered[1], xs[1], "all_gather_coalesced 1");
  std::vector<Tensor> scattered = {gpu(Tensor::zeros({5})), gpu(Tensor::zeros({2, 3}))};
  world->reduce_scatter_coalesced(scattered, xs, ReduceOp::max).wait();
  expect_equal(scattered[0], xs[0], "reduce_scatter_coalesced 0");
  expect_equal(scattered[1], xs[1], "reduce_scatter_coalesced 1");
  EXPECT_EQ(world->stats().count(OpKind::all_reduce), 1);
}

// The operation runs after the kernels queued before the call, and a context
// that waits on its Work sees the result without the host waiting.
TEST(CudaNccl, WorkOrdersAContextAfterTheOperation) {
  WEFT_REQUIRE_GPU();
  auto world = nccl_world_of_one(0);
  const ExecContext ctx = ExecContext::cuda(0);
  const int64_t n = int64_t{1} << 24;
  Tensor x = ctx.empty({n});
  x.fill(3.0f);
  Tensor y = ctx.zeros({n});
  // Queued on the legacy default stream, without blocking the host: the
  // all-reduce must read x after it.
  x.copy_from(gpu(Tensor::full({n}, 7.0f)));
  Work w = world->all_reduce(y, x, ReduceOp::max);
  EXPECT_EQ(w.what(), "all_reduce #0 on group 'world' (world ranks [0])");
  w.wait(ctx);
  // The copy to the host runs on the legacy default stream, after ctx's stream.
  const Tensor back = host(y);
  EXPECT_EQ(back.item(0), 7.0f);
  EXPECT_EQ(back.item(n - 1), 7.0f);
  w.wait();
  EXPECT_TRUE(w.is_completed());
  EXPECT_EQ(w.error(), nullptr);
  // A complete Work waits for no time at all.
  w.wait(std::chrono::milliseconds(1));
  // A host context is ordered by a host wait.
  world->all_reduce(y).wait(ExecContext::host());
  EXPECT_EQ(y.item(0), 7.0f);
}

TEST(CudaNccl, RefusesTensorsOffItsGpu) {
  WEFT_REQUIRE_GPU();
  auto world = nccl_world_of_one(0);
  Tensor h = Tensor::zeros({4});
  const std::string e = error_of([&] { world->all_reduce(h); });
  EXPECT_TRUE(contains(e,
                       "all_reduce on group 'world': the tensors are on cpu, but the nccl "
                       "backend's group 'world' (world ranks [0]) moves memory of cuda:0 only"))
      << e;
  const std::string g = error_of([&] { world->all_gather(gpu(Tensor::zeros({4})), h); });
  EXPECT_TRUE(contains(g, "must be on one device, got input on cpu, output on cuda:0")) << g;
  EXPECT_EQ(world->stats().total_calls(), 0);
}

TEST(CudaNccl, SplitsAndBootstrapsOverAHostGroup) {
  WEFT_REQUIRE_GPU();
  auto world = nccl_world_over(*local_world_of_one());
  EXPECT_EQ(world->backend(), "nccl");
  EXPECT_EQ(world->world_ranks(), std::vector<int>{0});
  auto tp = world->new_subgroups_by_enumeration({{0}}, "tp");
  ASSERT_NE(tp, nullptr);
  EXPECT_EQ(tp->backend(), "nccl");
  EXPECT_EQ(tp->name(), "tp");
  EXPECT_EQ(tp->size(), 1);
  EXPECT_EQ(tp->timeout(), world->timeout());
  Tensor t = ramp({8}, DType::bf16);
  const Tensor want = gpu(host(t));
  tp->all_reduce(t, ReduceOp::avg).wait();
  expect_equal(t, want, "all_reduce on the split group");
  EXPECT_TRUE(contains(tp->barrier().what(), "group 'tp'"));
  auto chosen = init_world("nccl");
  EXPECT_EQ(chosen->backend(), "nccl");
  EXPECT_EQ(init_world("auto")->backend(), "local");
}

// An operation that cannot finish within the timeout (it waits for copies
// queued before it) aborts the communicator: its Work and every later call
// fail with errors naming the group and the operation.
TEST(CudaNccl, TimeoutAbortsTheGroup) {
  WEFT_REQUIRE_GPU();
  auto world = nccl_world_of_one(0);
  const int64_t n = int64_t{1} << 28;  // 1 GiB of f32
  Tensor a = gpu(Tensor::zeros({1}));
  Tensor big = Tensor::zeros({n}, DType::f32, Device::cuda(0));
  Tensor other = Tensor::empty({n}, DType::f32, Device::cuda(0));
  for (int i = 0; i < 16; ++i) other.copy_from(big);
  world->set_timeout(std::chrono::milliseconds(1));
  Work late = world->all_reduce(a);
  const std::string e = error_of([&] { late.wait(); });
  EXPECT_TRUE(contains(e,
                       "all_reduce #0 on group 'world' (world ranks [0]) timed out after "
                       "0.001 s on rank 0"))
      << e;
  EXPECT_TRUE(contains(e, "aborted")) << e;
  EXPECT_TRUE(late.is_completed());
  world->set_timeout(std::chrono::seconds(60));
  const std::string after = error_of([&] { world->barrier().wait(); });
  EXPECT_TRUE(contains(after, "barrier #1 on group 'world' (world ranks [0]) failed: ")) << after;
}

}  // namespace
}  // namespace weft::comm
