// The CUDA attention kernels against the CPU ones (themselves tested against
// an fp64 reference and finite differences in attention_test.cpp) on the same
// inputs: outputs, logsumexp and gradients, with and without dropout (the
// GPU draws the same stream, so it keeps the same weights).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_testing.h"
#include "testing.h"
#include "weft/core/cuda.h"
#include "weft/kernels/attention.h"

namespace weft::kernels {
namespace {

using weft::testing::close;
using weft::testing::gpu;
using weft::testing::host;
using weft::testing::random_tensor;
using weft::testing::Tolerance;

struct Case {
  int64_t B, T, H, D;
};

Shape tokens(const Case& c, bool sequence_major, int64_t width) {
  return sequence_major ? Shape{c.T, c.B, width} : Shape{c.B, c.T, width};
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (float v : t.to_vector()) m = std::max(m, static_cast<double>(std::abs(v)));
  return m;
}

// Errors are measured against the largest magnitude of the expected tensor:
// outputs and gradients are sums of terms of either sign, so an element can
// cancel to near zero while its rounding error stays that of the terms. f32:
// both sides accumulate in f32 in different orders (1e-5 of the scale). bf16:
// both round the weights, dS and the results to bf16, and an f32 difference
// in the last bit can move a rounding by one bf16 step (2^-8 relative), hence
// the bf16 tolerance of docs/design.md against the scale.
Tolerance tolerance(DType dt) {
  return dt == DType::f32 ? Tolerance{1e-5, 1e-6} : weft::testing::kBF16;
}

struct Result {
  Tensor out, lse, dqkv;
};

// Forward and backward on `ec` from host inputs; the results on the host.
Result run(const ExecContext& ec, const Tensor& qkv, const Tensor& dout,
           const AttentionConfig& cfg) {
  const Tensor x = qkv.to(ec.device()), g = dout.to(ec.device());
  Tensor out = ec.empty(dout.shape(), dout.dtype());
  Tensor dqkv = ec.empty(qkv.shape(), qkv.dtype());
  AttentionSaved saved;
  AttentionWorkspace workspace;
  attention_forward(ec, x, cfg, out, saved, workspace);
  attention_backward(ec, g, x, saved, cfg, dqkv, workspace);
  return {host(out), host(saved.lse), host(dqkv)};
}

// Runs case c on the CPU and on cuda:0 and compares everything.
void expect_same(const Case& c, DType dt, bool sequence_major, bool causal, float dropout) {
  SCOPED_TRACE(::testing::Message()
               << "B=" << c.B << " T=" << c.T << " H=" << c.H << " D=" << c.D << " "
               << dtype_name(dt) << (sequence_major ? " sequence-major" : " batch-major")
               << (causal ? " causal" : " non-causal") << " dropout=" << dropout);
  AttentionConfig cfg;
  cfg.heads = c.H;
  cfg.dropout = dropout;
  cfg.seed = 0x9E3779B97F4A7C15ull;
  // Not a multiple of 4: rows start inside Philox blocks.
  cfg.offset = 7;
  cfg.causal = causal;
  cfg.sequence_major = sequence_major;
  const int64_t C = c.H * c.D;
  const Tensor qkv = random_tensor(tokens(c, sequence_major, 3 * C), 11, -1.0f, 1.0f, dt);
  const Tensor dout = random_tensor(tokens(c, sequence_major, C), 12, -1.0f, 1.0f, dt);
  const ExecContext gec = ExecContext::cuda(0);
  const Result want = run(ExecContext::host(), qkv, dout, cfg);
  const Result got = run(gec, qkv, dout, cfg);
  const Tolerance tol = tolerance(dt);
  EXPECT_TRUE(close(want.out, got.out, tol, max_abs(want.out))) << "out";
  EXPECT_TRUE(close(want.lse, got.lse, Tolerance{1e-5, 1e-6}, max_abs(want.lse))) << "lse";
  EXPECT_TRUE(close(want.dqkv, got.dqkv, tol, max_abs(want.dqkv))) << "dqkv";
}

// Every small shape, layout, mask and dropout setting in dtype dt. D = 128
// takes the CUDA-core kernels' widest row layout, D = 8 and 24 leave threads
// of a row without dimensions; in bf16, D = 16, 32, 64 and 128 take the
// tensor-core kernels; T = 1, 17, 65 and 130 end inside a tile.
void expect_same_on_small_shapes(DType dt) {
  for (int64_t T : {1, 17, 64, 65, 130}) {
    for (int64_t D : {8, 16, 24, 32, 64, 128}) {
      for (bool sequence_major : {false, true}) {
        for (bool causal : {true, false}) {
          for (float dropout : {0.0f, 0.1f}) {
            expect_same({2, T, 3, D}, dt, sequence_major, causal, dropout);
          }
        }
      }
    }
  }
}

TEST(CudaAttention, MatchesCpuF32) {
  WEFT_REQUIRE_GPU();
  expect_same_on_small_shapes(DType::f32);
}

TEST(CudaAttention, MatchesCpuBf16) {
  WEFT_REQUIRE_GPU();
  expect_same_on_small_shapes(DType::bf16);
}

// bf16 heads of 16, 32, 64 and 128 run on tensor cores (the shapes above
// then test those kernels), everything else on CUDA cores.
TEST(CudaAttention, Bf16HeadsOfMultiplesOf16UseTensorCores) {
  if (!weft::cuda::built()) GTEST_SKIP() << weft::cuda::unavailable_reason();
  const Device gpu0 = Device::cuda(0);
  EXPECT_STREQ(attention_path(Device::cpu(), DType::bf16, 64), "cpu");
  for (int64_t D : {16, 32, 64, 128}) {
    EXPECT_STREQ(attention_path(gpu0, DType::bf16, D), "tensor cores") << D;
    EXPECT_STREQ(attention_path(gpu0, DType::f32, D), "CUDA cores") << D;
  }
  for (int64_t D : {8, 24, 48}) {
    EXPECT_STREQ(attention_path(gpu0, DType::bf16, D), "CUDA cores") << D;
  }
}

// GPT-2 small: 12 heads of 64 over 1024 positions.
TEST(CudaAttention, MatchesCpuAtGpt2Shape) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::bf16}) {
    for (float dropout : {0.0f, 0.1f}) expect_same({1, 1024, 12, 64}, dt, false, true, dropout);
  }
}

TEST(CudaAttention, DropoutMaskMatchesCpu) {
  WEFT_REQUIRE_GPU();
  for (bool causal : {true, false}) {
    AttentionConfig cfg;
    cfg.heads = 3;
    cfg.dropout = 0.3f;
    cfg.seed = 0x123456789ABCDEFull;
    cfg.offset = (uint64_t{1} << 33) + 5;  // counters above 2^32
    cfg.causal = causal;
    const Tensor want = attention_dropout_mask(ExecContext::host(), cfg, 2, 67);
    const Tensor got = host(attention_dropout_mask(ExecContext::cuda(0), cfg, 2, 67));
    ASSERT_EQ(got.shape(), want.shape());
    ASSERT_EQ(got.dtype(), DType::u8);
    EXPECT_EQ(got.to_vector(), want.to_vector()) << (causal ? "causal" : "non-causal");
  }
}

// With the same AttentionSaved and workspace, repeated calls allocate no
// device memory from the driver and give bitwise the same results (the
// kernels have no atomics): f32 on CUDA cores, bf16 on tensor cores.
void expect_steady_state(const Case& c, DType dt) {
  SCOPED_TRACE(dtype_name(dt));
  AttentionConfig cfg;
  cfg.heads = c.H;
  cfg.dropout = 0.1f;
  cfg.seed = 5;
  const ExecContext gec = ExecContext::cuda(0);
  const Tensor qkv = gpu(random_tensor(tokens(c, false, 3 * c.H * c.D), 3, -1.0f, 1.0f, dt));
  const Tensor dout = gpu(random_tensor(tokens(c, false, c.H * c.D), 4, -1.0f, 1.0f, dt));
  Tensor out = gec.empty(dout.shape(), dt);
  Tensor dqkv = gec.empty(qkv.shape(), dt);
  AttentionSaved saved;
  AttentionWorkspace workspace;
  attention_forward(gec, qkv, cfg, out, saved, workspace);
  attention_backward(gec, dout, qkv, saved, cfg, dqkv, workspace);
  const std::vector<float> first_out = out.to_vector(), first_dqkv = dqkv.to_vector();
  const void* lse = saved.lse.raw();
  const int64_t before = weft::cuda::allocator_stats(Device::cuda(0)).driver_allocations;
  for (int i = 0; i < 3; ++i) {
    attention_forward(gec, qkv, cfg, out, saved, workspace);
    attention_backward(gec, dout, qkv, saved, cfg, dqkv, workspace);
  }
  gec.synchronize();
  EXPECT_EQ(weft::cuda::allocator_stats(Device::cuda(0)).driver_allocations, before);
  EXPECT_EQ(saved.lse.raw(), lse);
  EXPECT_EQ(out.to_vector(), first_out);
  EXPECT_EQ(dqkv.to_vector(), first_dqkv);
}

TEST(CudaAttention, SteadyStateAllocatesNothingAndRepeats) {
  WEFT_REQUIRE_GPU();
  expect_steady_state({2, 130, 3, 24}, DType::f32);
  expect_steady_state({2, 130, 3, 64}, DType::bf16);
}

TEST(CudaAttention, RejectsHeadsWiderThan128) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  AttentionConfig cfg;
  cfg.heads = 1;
  const Tensor qkv = gec.zeros({1, 4, 3 * 136});
  Tensor out = gec.empty({1, 4, 136});
  AttentionSaved saved;
  AttentionWorkspace workspace;
  EXPECT_NE(weft::testing::error_of([&] {
              attention_forward(gec, qkv, cfg, out, saved, workspace);
            }).find("head dimensions up to 128"),
            std::string::npos);
}

}  // namespace
}  // namespace weft::kernels
