// Tensors on a GPU: copies between host and device, zero/fill, contexts and
// the caching allocator behind them. Without a GPU these tests skip, except
// those that check the errors a build or machine without one gives.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cuda_testing.h"
#include "testing.h"
#include "weft/core/cuda.h"
#include "weft/core/exec_context.h"

namespace weft {
namespace {

using testing::gpu;
using testing::host;

TEST(NoGpu, TensorAllocationSaysWhy) {
  if (cuda::device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  try {
    Tensor::empty({4}, DType::f32, Device::cuda(0));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cuda:0"), std::string::npos) << what;
    EXPECT_FALSE(cuda::unavailable_reason().empty());
    EXPECT_NE(what.find(cuda::unavailable_reason()), std::string::npos) << what;
  }
  EXPECT_THROW(ExecContext::cuda(0), Error);
}

TEST(CudaTensor, RoundTripKeepsEveryBit) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::bf16, DType::e4m3}) {
    const Tensor x = testing::random_tensor({3, 5, 7}, 11, -3.0f, 3.0f).to(dt);
    const Tensor g = gpu(x);
    EXPECT_TRUE(g.device() == Device::cuda(0));
    EXPECT_EQ(g.shape(), x.shape());
    const Tensor back = host(g);
    ASSERT_EQ(back.nbytes(), x.nbytes());
    EXPECT_EQ(std::memcmp(back.raw(), x.raw(), static_cast<size_t>(x.nbytes())), 0)
        << dtype_name(dt);
  }
  const Tensor ids = Tensor::from_i32({4}, std::vector<int32_t>{7, -100, 0, 50256});
  const Tensor ids_back = host(gpu(ids));
  EXPECT_EQ(std::memcmp(ids_back.raw(), ids.raw(), 16), 0);
}

TEST(CudaTensor, ViewsCopiesAndConversionsOnTheDevice) {
  WEFT_REQUIRE_GPU();
  const Tensor x = testing::random_tensor({8, 4}, 3);
  const Tensor g = gpu(x);
  // A view along dim 0 addresses the right bytes.
  EXPECT_EQ(host(g.narrow(2, 3)).to_vector(), x.narrow(2, 3).to_vector());
  // Device-to-device clone, and a conversion between devices.
  EXPECT_EQ(g.clone().to_vector(), x.to_vector());
  Tensor b = Tensor::empty({8, 4}, DType::bf16, Device::cuda(0));
  b.copy_from(x);
  EXPECT_EQ(b.to_vector(), x.to(DType::bf16).to_vector());
  EXPECT_EQ(g.item(5), x.item(5));
}

TEST(CudaTensor, Bf16ConversionOnTheDeviceMatchesTheHost) {
  WEFT_REQUIRE_GPU();
  std::vector<float> v = testing::random_tensor({4099}, 5, -1e3f, 1e3f).to_vector();
  v[0] = std::numeric_limits<float>::quiet_NaN();
  v[1] = std::numeric_limits<float>::infinity();
  v[2] = -0.0f;
  v[3] = 3.0e38f;  // rounds to bf16 infinity
  const Tensor x = Tensor::from({4099}, v);
  Tensor b = Tensor::empty({4099}, DType::bf16, Device::cuda(0));
  b.copy_from(gpu(x));
  const Tensor expect = x.to(DType::bf16);
  const Tensor got = host(b);
  EXPECT_EQ(std::memcmp(got.raw(), expect.raw(), static_cast<size_t>(expect.nbytes())), 0);
  Tensor back = Tensor::empty({4099}, DType::f32, Device::cuda(0));
  back.copy_from(b);
  const Tensor back_host = host(back);
  const Tensor expect_back = expect.to(DType::f32);
  EXPECT_EQ(std::memcmp(back_host.raw(), expect_back.raw(), 4099 * 4), 0);
}

TEST(CudaTensor, ZeroAndFill) {
  WEFT_REQUIRE_GPU();
  Tensor g = gpu(testing::random_tensor({1000}, 1));
  g.zero();
  for (float v : g.to_vector()) ASSERT_EQ(v, 0.0f);
  g.fill(2.5f);
  for (float v : g.to_vector()) ASSERT_EQ(v, 2.5f);
}

TEST(CudaTensor, HostPointersOfDeviceTensorsAreRefused) {
  WEFT_REQUIRE_GPU();
  const Tensor g = Tensor::zeros({4}, DType::f32, Device::cuda(0));
  EXPECT_THROW(g.data<float>(), Error);
}

TEST(CudaTensor, ContextAllocationsReachASteadyState) {
  WEFT_REQUIRE_GPU();
  const ExecContext ec = ExecContext::cuda(0);
  EXPECT_NE(ec.stream(), nullptr);
  MemoryTracker tracker;
  ScopedMemoryTracker scope(tracker);
  for (int i = 0; i < 3; ++i) {
    Tensor a = ec.empty({256, 256});
    Tensor b = ec.zeros({1 << 20}, DType::bf16);
    EXPECT_EQ(tracker.device(Device::cuda(0)).live, a.nbytes() + b.nbytes());
  }
  EXPECT_EQ(tracker.device(Device::cuda(0)).live, 0);
  const auto before = cuda::allocator_stats(Device::cuda(0));
  for (int i = 0; i < 3; ++i) {
    Tensor a = ec.empty({256, 256});
    Tensor b = ec.zeros({1 << 20}, DType::bf16);
  }
  EXPECT_EQ(cuda::allocator_stats(Device::cuda(0)).driver_allocations, before.driver_allocations);
  ec.synchronize();
}

}  // namespace
}  // namespace weft
