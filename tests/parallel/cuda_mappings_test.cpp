// The TP/SP mappings on GPU tensors (ranks as threads sharing cuda:0): each
// mapping, forward and backward, along dimension 0 and an inner dimension,
// returns on the GPU the bits it returns on the CPU. The block permutations
// (the transpose kernel on the context's stream) and the local backend's GPU
// collectives are what differ.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>

#include "contexts.h"
#include "cuda_testing.h"
#include "testing.h"
#include "weft/comm/local.h"
#include "weft/parallel/mappings.h"

namespace weft::parallel {
namespace {

using weft::testing::gpu;
using weft::testing::host;

::testing::AssertionResult same_bytes(const Tensor& on_gpu, const Tensor& on_cpu) {
  if (!on_gpu.device().is_cuda()) return ::testing::AssertionFailure() << "not on the GPU";
  const Tensor a = host(on_gpu);
  if (!(a.shape() == on_cpu.shape()))
    return ::testing::AssertionFailure() << "shape " << a.shape() << ", want " << on_cpu.shape();
  if (std::memcmp(a.raw(), on_cpu.raw(), static_cast<size_t>(a.nbytes())) == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "the GPU result differs from the CPU's";
}

class CudaMappings : public ::testing::TestWithParam<int> {};

TEST_P(CudaMappings, MatchTheCpu) {
  WEFT_REQUIRE_GPU();
  const std::pair<const char*, Mapping> mappings[] = {
      {"copy_to_tp", Mapping::copy_to_tp},
      {"reduce_from_tp", Mapping::reduce_from_tp},
      {"scatter_to_tp", Mapping::scatter_to_tp},
      {"gather_from_tp", Mapping::gather_from_tp},
      {"scatter_to_sp", Mapping::scatter_to_sp},
      {"gather_from_sp", Mapping::gather_from_sp},
      {"reduce_scatter_to_sp", Mapping::reduce_scatter_to_sp},
      {"sp_to_tp", Mapping::sp_to_tp}};
  comm::run_local(GetParam(), [&](comm::ProcessGroup& g) {
    g.set_timeout(std::chrono::seconds(60));
    const int n = g.size();
    const auto seed = static_cast<uint32_t>(10 * g.rank());
    for (const auto& [name, m] : mappings) {
      for (int sp_dim : {0, 1}) {
        SCOPED_TRACE(std::string(name) + " along dimension " + std::to_string(sp_dim));
        const Tensor x = weft::testing::random_tensor({2 * n, 3 * n, 2 * n}, seed + 1);
        const Tensor y = forward(exec_of(x), m, &g, x, sp_dim);
        EXPECT_TRUE(same_bytes(forward(exec_of(gpu(x)), m, &g, gpu(x), sp_dim), y));
        const Tensor dy = weft::testing::random_tensor(y.shape(), seed + 2);
        EXPECT_TRUE(same_bytes(backward(exec_of(gpu(dy)), m, &g, gpu(dy), sp_dim),
                               backward(exec_of(dy), m, &g, dy, sp_dim)));
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, CudaMappings, ::testing::Values(2, 4),
                         [](const auto& p) { return "world" + std::to_string(p.param); });

}  // namespace
}  // namespace weft::parallel
