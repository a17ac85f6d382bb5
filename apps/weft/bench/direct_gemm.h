// The direct oneDNN matmul, called through oneDNN's own API: the yardstick
// weft's GEMMs (weft bench gemm) and whole training steps (weft bench step's
// limit column) are measured against. oneDNN's header stays in the .cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "weft/core/dtype.h"

namespace weft {

// One GEMM of a layer: c (m, n) = op(a) (m, k) · op(b) (k, n).
struct GemmShape {
  const char* layer;
  const char* op;  // fwd, dgrad, wgrad
  int64_t m, n, k;
  bool trans_a, trans_b;
};

// y = x·Wᵀ, dx = dy·W, dW += dyᵀ·x for qkv, proj, fc1 and fc2 of a GPT-2
// layer of width c over `tokens` rows.
std::vector<GemmShape> layer_gemms(int64_t tokens, int64_t c);
// The language-model head's three GEMMs (logits = x·Wᵀ over `vocab` columns,
// their dgrad and wgrad), named "head".
std::vector<GemmShape> head_gemms(int64_t tokens, int64_t c, int64_t vocab);

// A oneDNN matmul built and executed with the plain C++ API, with the same
// layouts, types and sum post-op (accumulate) as weft's call.
class DirectGemm {
 public:
  DirectGemm(const GemmShape& s, DType in, DType out, void* a, void* b, void* c, bool accumulate);
  ~DirectGemm();
  DirectGemm(const DirectGemm&) = delete;
  DirectGemm& operator=(const DirectGemm&) = delete;
  void run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The 12 GEMMs of one layer of width `width` over `tokens` rows, run
// directly through oneDNN on the calling thread's threads, built once (the
// primitives created and the buffers touched): `seconds()` times one run of
// the set, so that a benchmark can alternate it with what it measures.
// bf16 without native kernels runs the f32 matmul its emulation runs on.
class LayerGemmProbe {
 public:
  LayerGemmProbe(DType dtype, int64_t tokens, int64_t width);
  ~LayerGemmProbe();
  LayerGemmProbe(const LayerGemmProbe&) = delete;
  LayerGemmProbe& operator=(const LayerGemmProbe&) = delete;
  double seconds();
  double flops() const { return flops_; }

 private:
  struct Call;
  std::vector<std::unique_ptr<Call>> calls_;
  double flops_ = 0;
};

// The rate (GFLOP/s) of the 12 GEMMs of one layer of width `width` over
// `tokens` rows, run directly through oneDNN on the calling thread's threads:
// their FLOPs over the best of `rounds` timings of the set. bf16 without
// native kernels is measured as the f32 matmul its emulation runs on.
double direct_layer_gflops(DType dtype, int64_t tokens, int64_t width, int rounds = 3);

}  // namespace weft
