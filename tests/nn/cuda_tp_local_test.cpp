// The TP-equivalence suite on a GPU: the cases of tp_local_test.cpp with every
// rank's modules on cuda:0 (each rank thread with its own stream: contexts.h's
// test_device), their collectives on the local backend's GPU path, against
// the TP=1 reference computed on the CPU.
//
// Tolerances stay docs/design.md's (f32 1e-5 relative or 1e-6 absolute at O(1)
// values, bf16 1.6e-2): the GPU changes the order of the sums in its GEMMs,
// norms and softmax, as TP itself does on the CPU, and the cases are built
// with O(1) activations and gradients, so f32 differences stay around 1e-6 of
// the values. A GEMM computing in TF32 rather than f32 would not pass, by design.
//
// The quantized cases (FP8/MXFP8/NVFP4 through the CPU's emulation) and GTP
// stay on the CPU suites.
#include <gtest/gtest.h>

#include "contexts.h"
#include "cuda_testing.h"
#include "tp_cases.h"
#include "weft/comm/local.h"

namespace weft::nn::testing {
namespace {

std::vector<TpCase> gpu_cases() {
  std::vector<TpCase> all;
  for (auto* family : {&linear_cases, &vocab_cases, &layer_cases, &gpt_cases}) {
    std::vector<TpCase> more = family();
    all.insert(all.end(), more.begin(), more.end());
  }
  return all;
}

class CudaTpLocal : public ::testing::TestWithParam<std::tuple<TpCase, int>> {};

TEST_P(CudaTpLocal, MatchesCpuTp1) {
  WEFT_REQUIRE_GPU();
  const auto& [c, tp] = GetParam();
  comm::run_local(tp, [&](comm::ProcessGroup& world) {
    const ScopedTestDevice on_gpu(Device::cuda(0));
    c.run(world, tp);
  });
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaTpLocal,
                         ::testing::Combine(::testing::ValuesIn(gpu_cases()),
                                            ::testing::Values(2, 4)),
                         [](const auto& p) {
                           return std::get<0>(p.param).name + "_tp" +
                                  std::to_string(std::get<1>(p.param));
                         });

}  // namespace
}  // namespace weft::nn::testing
