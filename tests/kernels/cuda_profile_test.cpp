// Kernel profiling (cuda::set_kernel_profiling): every dispatched CUDA kernel
// is timed under its name.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "cuda_testing.h"
#include "testing.h"
#include "weft/kernels/activation.h"
#include "weft/kernels/gemm.h"

namespace weft::kernels {
namespace {

using testing::gpu;

TEST(CudaProfile, TimesEveryDispatchedKernelByName) {
  WEFT_REQUIRE_GPU();
  const ExecContext ec = ExecContext::cuda(0);
  const Tensor a = gpu(testing::random_tensor({64, 32}, 1));
  const Tensor b = gpu(testing::random_tensor({32, 16}, 2));
  Tensor c = ec.empty({64, 16});
  cuda::reset_kernel_profile();
  cuda::set_kernel_profiling(true);
  for (int i = 0; i < 3; ++i) gemm(ec, a, b, c);
  gelu_forward(ec, c, c);
  cuda::set_kernel_profiling(false);
  gemm(ec, a, b, c);  // not profiled
  const std::vector<cuda::KernelTime> times = cuda::kernel_profile();
  auto find = [&](const std::string& name) {
    return std::find_if(times.begin(), times.end(),
                        [&](const cuda::KernelTime& t) { return t.name == name; });
  };
  // A GEMM's row is named by its shape: m x n x k, op(a) op(b), output type.
  ASSERT_NE(find("gemm 64x16x32 NN f32"), times.end());
  EXPECT_EQ(find("gemm 64x16x32 NN f32")->calls, 3);
  EXPECT_GT(find("gemm 64x16x32 NN f32")->ms, 0.0);
  ASSERT_NE(find("gelu_forward"), times.end());
  EXPECT_EQ(find("gelu_forward")->calls, 1);
  cuda::reset_kernel_profile();
  EXPECT_TRUE(cuda::kernel_profile().empty());
}

}  // namespace
}  // namespace weft::kernels
