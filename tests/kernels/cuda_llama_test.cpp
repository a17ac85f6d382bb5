// The CUDA kernels of Llama-family models against the CPU ones (themselves
// tested against fp64 references in attention_gqa_test.cpp, rope_test.cpp and
// swiglu_test.cpp) on the same inputs: grouped-query attention (forward and
// backward, both row layouts, with and without dropout, on CUDA and tensor
// cores), RoPE and SwiGLU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "cuda_testing.h"
#include "testing.h"
#include "weft/kernels/activation.h"
#include "weft/kernels/attention.h"
#include "weft/kernels/rope.h"

namespace weft::kernels {
namespace {

using weft::testing::close;
using weft::testing::gpu;
using weft::testing::host;
using weft::testing::random_tensor;
using weft::testing::Tolerance;

const ExecContext& cpu_ec = ExecContext::host();

double max_abs(const Tensor& t) {
  double m = 0;
  for (float v : t.to_vector()) m = std::max(m, static_cast<double>(std::abs(v)));
  return m;
}

// As cuda_attention_test.cpp: errors against the largest magnitude, f32 to
// 1e-5 of it (different summation orders), bf16 to one rounding step.
Tolerance tolerance(DType dt) {
  return dt == DType::f32 ? Tolerance{1e-5, 1e-6} : weft::testing::kBF16;
}

struct Case {
  int64_t B, T, H, Hkv, D;
};

struct Result {
  Tensor out, lse, dqkv;
};

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

void expect_same(const Case& c, DType dt, bool sequence_major, bool causal, float dropout) {
  SCOPED_TRACE(::testing::Message()
               << "B=" << c.B << " T=" << c.T << " H=" << c.H << " Hkv=" << c.Hkv << " D=" << c.D
               << " " << dtype_name(dt) << (sequence_major ? " sequence-major" : " batch-major")
               << (causal ? " causal" : " non-causal") << " dropout=" << dropout);
  const AttentionConfig cfg{.heads = c.H,
                            .kv_heads = c.Hkv,
                            .dropout = dropout,
                            .seed = 0x9E3779B97F4A7C15ull,
                            .offset = 7,
                            .causal = causal,
                            .sequence_major = sequence_major};
  const int64_t width = (c.H + 2 * c.Hkv) * c.D, C = c.H * c.D;
  const auto tokens = [&](int64_t w) {
    return sequence_major ? Shape{c.T, c.B, w} : Shape{c.B, c.T, w};
  };
  const Tensor qkv = random_tensor(tokens(width), 21, -1.0f, 1.0f, dt);
  const Tensor dout = random_tensor(tokens(C), 22, -1.0f, 1.0f, dt);
  const Result want = run(cpu_ec, qkv, dout, cfg);
  const Result got = run(ExecContext::cuda(0), qkv, dout, cfg);
  const Tolerance tol = tolerance(dt);
  EXPECT_TRUE(close(want.out, got.out, tol, max_abs(want.out))) << "out";
  EXPECT_TRUE(close(want.lse, got.lse, Tolerance{1e-5, 1e-6}, max_abs(want.lse))) << "lse";
  EXPECT_TRUE(close(want.dqkv, got.dqkv, tol, max_abs(want.dqkv))) << "dqkv";
}

// D = 24 runs on CUDA cores in both dtypes, D = 16 and 64 on tensor cores in
// bf16; T = 17, 65 and 130 end inside a tile; Hkv = 1 (multi-query) and 2.
void expect_same_on_small_shapes(DType dt) {
  for (int64_t T : {17, 65, 130})
    for (int64_t D : {16, 24, 64})
      for (int64_t Hkv : {1, 2})
        for (bool sequence_major : {false, true})
          for (float dropout : {0.0f, 0.1f}) {
            expect_same({2, T, 4, Hkv, D}, dt, sequence_major, true, dropout);
          }
  expect_same({2, 65, 6, 3, 32}, dt, false, false, 0.1f);
}

TEST(CudaAttentionGqa, MatchesCpuF32) {
  WEFT_REQUIRE_GPU();
  expect_same_on_small_shapes(DType::f32);
}

TEST(CudaAttentionGqa, MatchesCpuBf16) {
  WEFT_REQUIRE_GPU();
  expect_same_on_small_shapes(DType::bf16);
}

// Llama-3-8B's head layout: 32 query heads over 8 key/value heads of 128.
TEST(CudaAttentionGqa, MatchesCpuAtLlamaHeads) {
  WEFT_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::bf16})
    expect_same({1, 256, 32, 8, 128}, dt, false, true, 0.0f);
}

TEST(CudaRope, MatchesCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  for (DType dt : {DType::f32, DType::bf16})
    for (bool sequence_major : {false, true}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " sequence-major " << sequence_major);
      const RopeConfig cfg{
          .heads = 8, .kv_heads = 2, .sequence_major = sequence_major, .position_offset = 5};
      const Tensor table = rope_table(cpu_ec, 64, 64, 500000.0);
      const Tensor gtable = rope_table(gec, 64, 64, 500000.0);
      EXPECT_EQ(host(gtable).to_vector(), table.to_vector());
      const Tensor x = random_tensor({3, 37, 12 * 64}, 23, -2, 2, dt);
      for (bool backward : {false, true}) {
        Tensor want = x.clone(), got = gpu(x);
        if (backward) {
          rope_backward(cpu_ec, want, table, cfg);
          rope_backward(gec, got, gtable, cfg);
        } else {
          rope_forward(cpu_ec, want, table, cfg);
          rope_forward(gec, got, gtable, cfg);
        }
        EXPECT_TRUE(close(want, host(got), tolerance(dt), max_abs(want))) << backward;
      }
    }
}

TEST(CudaSwiglu, MatchesCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor gu = random_tensor({37, 2 * 771}, 24, -8, 8, dt);
    const Tensor dy = random_tensor({37, 771}, 25, -1, 1, dt);
    Tensor out = cpu_ec.empty({37, 771}, dt), dgu = cpu_ec.empty({37, 2 * 771}, dt);
    Tensor gout = gec.empty({37, 771}, dt), gdgu = gec.empty({37, 2 * 771}, dt);
    swiglu_forward(cpu_ec, gu, out);
    swiglu_backward(cpu_ec, dy, gu, dgu);
    const Tensor ggu = gpu(gu);
    swiglu_forward(gec, ggu, gout);
    swiglu_backward(gec, gpu(dy), ggu, gdgu);
    const Tolerance tol = dt == DType::f32 ? weft::testing::kF32 : weft::testing::kBF16;
    EXPECT_TRUE(close(out, host(gout), tol)) << "out";
    EXPECT_TRUE(close(dgu, host(gdgu), tol)) << "dgu";
  }
}

}  // namespace
}  // namespace weft::kernels
