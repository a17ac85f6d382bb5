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
  std::string kernels;  // what the forward ran
};

// Forward and backward on `ec` from host inputs; the results on the host.
// `backward_cfg`: the backward's config where it differs from the forward's.
Result run(const ExecContext& ec, const Tensor& qkv, const Tensor& dout, const AttentionConfig& cfg,
           const AttentionConfig* backward_cfg = nullptr) {
  const Tensor x = qkv.to(ec.device()), g = dout.to(ec.device());
  Tensor out = ec.empty(dout.shape(), dout.dtype());
  Tensor dqkv = ec.empty(qkv.shape(), qkv.dtype());
  AttentionSaved saved;
  AttentionWorkspace workspace;
  attention_forward(ec, x, cfg, out, saved, workspace);
  attention_backward(ec, g, x, saved, backward_cfg ? *backward_cfg : cfg, dqkv, workspace);
  return {host(out), host(saved.lse), host(dqkv), saved.kernels ? saved.kernels : "(none)"};
}

// How a case runs on the GPU: cuDNN allowed or not (weft's own kernels), the
// key/value heads (0: multi-head), and cuDNN only in the forward.
struct Options {
  bool cudnn = false;
  int64_t kv_heads = 0;
  bool cudnn_forward_only = false;
};

// Runs case c on the CPU and on cuda:0 and compares everything; returns the
// kernels the GPU's forward ran.
std::string expect_same(const Case& c, DType dt, bool sequence_major, bool causal, float dropout,
                        Options o = {}) {
  SCOPED_TRACE(::testing::Message()
               << "B=" << c.B << " T=" << c.T << " H=" << c.H << " Hkv=" << o.kv_heads
               << " D=" << c.D << " " << dtype_name(dt)
               << (sequence_major ? " sequence-major" : " batch-major")
               << (causal ? " causal" : " non-causal") << " dropout=" << dropout
               << (o.cudnn ? " cuDNN allowed" : " weft kernels")
               << (o.cudnn_forward_only ? " (forward only)" : ""));
  AttentionConfig cfg;
  cfg.heads = c.H;
  cfg.kv_heads = o.kv_heads;
  cfg.dropout = dropout;
  cfg.seed = 0x9E3779B97F4A7C15ull;
  // Not a multiple of 4: rows start inside Philox blocks.
  cfg.offset = 7;
  cfg.causal = causal;
  cfg.sequence_major = sequence_major;
  cfg.cudnn = o.cudnn;
  AttentionConfig backward_cfg = cfg;
  backward_cfg.cudnn = o.cudnn && !o.cudnn_forward_only;
  const int64_t C = c.H * c.D;
  const int64_t width = C + 2 * (o.kv_heads == 0 ? c.H : o.kv_heads) * c.D;
  const Tensor qkv = random_tensor(tokens(c, sequence_major, width), 11, -1.0f, 1.0f, dt);
  const Tensor dout = random_tensor(tokens(c, sequence_major, C), 12, -1.0f, 1.0f, dt);
  const ExecContext gec = ExecContext::cuda(0);
  const Result want = run(ExecContext::host(), qkv, dout, cfg);
  const Result got = run(gec, qkv, dout, cfg, &backward_cfg);
  const Tolerance tol = tolerance(dt);
  EXPECT_TRUE(close(want.out, got.out, tol, max_abs(want.out))) << "out (" << got.kernels << ")";
  EXPECT_TRUE(close(want.lse, got.lse, Tolerance{1e-5, 1e-6}, max_abs(want.lse)))
      << "lse (" << got.kernels << ")";
  EXPECT_TRUE(close(want.dqkv, got.dqkv, tol, max_abs(want.dqkv)))
      << "dqkv (" << got.kernels << ")";
  return got.kernels;
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
  AttentionConfig own;
  own.cudnn = false;
  EXPECT_STREQ(attention_path(Device::cpu(), DType::bf16, 64), "cpu");
  for (int64_t D : {16, 32, 64, 128}) {
    EXPECT_STREQ(attention_path(gpu0, DType::bf16, D, own), "tensor cores") << D;
    EXPECT_STREQ(attention_path(gpu0, DType::f32, D), "CUDA cores") << D;
  }
  for (int64_t D : {8, 24, 48}) {
    EXPECT_STREQ(attention_path(gpu0, DType::bf16, D, own), "CUDA cores") << D;
  }
}

// cuDNN takes bf16 calls without dropout, multi-head or multi-query, with
// head widths a multiple of 8 up to 128, where libcudnn loads; never f32,
// dropout or interleaved grouped-query heads.
TEST(CudaAttention, CudnnTakesWhatItSupports) {
  if (!weft::cuda::built()) GTEST_SKIP() << weft::cuda::unavailable_reason();
  const Device gpu0 = Device::cuda(0);
  const std::string status = attention_cudnn_status(gpu0);
  const bool on = !status.starts_with("off");
  AttentionConfig cfg;
  cfg.heads = 12;
  // Where cuDNN is on it takes these; else weft's kernels run them.
  EXPECT_STREQ(attention_path(gpu0, DType::bf16, 64, cfg), on ? "cuDNN" : "tensor cores") << status;
  EXPECT_STREQ(attention_path(gpu0, DType::bf16, 24, cfg), on ? "cuDNN" : "CUDA cores") << status;
  cfg.kv_heads = 1;  // multi-query
  EXPECT_STREQ(attention_path(gpu0, DType::bf16, 128, cfg), on ? "cuDNN" : "tensor cores")
      << status;
  // Never these.
  EXPECT_STREQ(attention_path(gpu0, DType::f32, 64, cfg), "CUDA cores");
  EXPECT_STREQ(attention_path(gpu0, DType::bf16, 12, cfg), "CUDA cores");   // not 8k
  EXPECT_STREQ(attention_path(gpu0, DType::bf16, 256, cfg), "CUDA cores");  // over 128
  cfg.kv_heads = 4;  // grouped-query, interleaved
  EXPECT_STREQ(attention_path(gpu0, DType::bf16, 64, cfg), "tensor cores");
  cfg.kv_heads = 0;
  cfg.dropout = 0.1f;
  EXPECT_STREQ(attention_path(gpu0, DType::bf16, 64, cfg), "tensor cores");
  cfg.dropout = 0.0f;
  cfg.cudnn = false;
  EXPECT_STREQ(attention_path(gpu0, DType::bf16, 64, cfg), "tensor cores");
}

// cuDNN's fused attention against the CPU, forward and backward, both row
// layouts, causal or not, multi-head and multi-query; the logsumexp it saves
// is weft's (a cuDNN forward followed by weft's backward matches too).
TEST(CudaAttention, CudnnMatchesCpuBf16) {
  WEFT_REQUIRE_GPU();
  const std::string status = attention_cudnn_status(Device::cuda(0));
  if (status.starts_with("off")) GTEST_SKIP() << "cuDNN attention is " << status;
  int cudnn_runs = 0;
  // (Each shape builds two cuDNN graphs, the slow part of this test.)
  for (int64_t T : {1, 17, 130, 512}) {
    for (int64_t D : {64, 128}) {
      for (bool sequence_major : {false, true}) {
        for (bool causal : {true, false}) {
          for (int64_t kv : {0, 1}) {
            const std::string k = expect_same({2, T, 4, D}, DType::bf16, sequence_major, causal,
                                              0.0f, {.cudnn = true, .kv_heads = kv});
            cudnn_runs += k == "cuDNN";
            // The GPT-2 and Llama head widths at ordinary lengths: cuDNN must take them.
            if (T >= 64) {
              EXPECT_EQ(k, "cuDNN") << "T=" << T << " D=" << D;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(cudnn_runs, 0);
  EXPECT_EQ(expect_same({2, 100, 4, 32}, DType::bf16, true, true, 0.0f, {.cudnn = true}), "cuDNN");
  expect_same({2, 130, 4, 64}, DType::bf16, false, true, 0.0f,
              {.cudnn = true, .cudnn_forward_only = true});
  expect_same({1, 1024, 12, 64}, DType::bf16, false, true, 0.0f, {.cudnn = true});
}

// Dropout and interleaved grouped-query heads stay on weft's kernels even
// with cuDNN allowed.
TEST(CudaAttention, CudnnLeavesDropoutAndGroupedQueryToWeft) {
  WEFT_REQUIRE_GPU();
  EXPECT_EQ(expect_same({2, 65, 4, 64}, DType::bf16, false, true, 0.1f, {.cudnn = true}),
            "tensor cores");
  EXPECT_EQ(
      expect_same({2, 65, 4, 64}, DType::bf16, true, true, 0.0f, {.cudnn = true, .kv_heads = 2}),
      "tensor cores");
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
void expect_steady_state(const Case& c, DType dt, float dropout = 0.1f) {
  SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " dropout " << dropout);
  AttentionConfig cfg;
  cfg.heads = c.H;
  cfg.dropout = dropout;
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
  // cuDNN (no dropout): its deterministic backward repeats bit for bit too.
  expect_steady_state({2, 130, 3, 64}, DType::bf16, 0.0f);
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
