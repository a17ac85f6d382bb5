// The CUDA transpose01 against the CPU one: a copy, so bitwise equal.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "bitwise.h"
#include "cuda_testing.h"
#include "testing.h"
#include "weft/core/error.h"
#include "weft/kernels/transpose.h"

namespace weft::kernels {
namespace {

using weft::testing::bitwise_equal;
using weft::testing::gpu;

const ExecContext& cpu_ec = ExecContext::host();

// A tensor of random bytes: every bit pattern of the dtype travels.
Tensor random_bytes(const Shape& shape, DType dtype, uint32_t seed) {
  Tensor t = Tensor::empty(shape, dtype);
  std::mt19937 gen(seed);
  auto* p = static_cast<uint8_t*>(t.raw());
  for (int64_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(gen());
  return t;
}

TEST(CudaTranspose, Transpose01MatchesCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  struct Case {
    Shape shape;
    DType dtype;
  };
  // Rows of 3084 bytes (4-byte words), 4 (i32 tokens), 10 (2-byte words),
  // 3 (bytes), 100608 (16-byte words: bf16 logits of GPT-2's vocabulary)
  // and 4 bytes of packed fp4.
  const std::vector<Case> cases = {{{37, 5, 771}, DType::f32},   {{8, 1024}, DType::i32},
                                   {{3, 7, 5}, DType::bf16},     {{5, 3, 3}, DType::u8},
                                   {{4, 6, 50304}, DType::bf16}, {{9, 11, 8}, DType::e2m1}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << dtype_name(c.dtype) << " " << c.shape);
    const Tensor in = random_bytes(c.shape, c.dtype, 1);
    Shape swapped = c.shape;
    swapped[0] = c.shape[1];
    swapped[1] = c.shape[0];
    Tensor out = Tensor::empty(swapped, c.dtype), gout = gpu(Tensor::zeros(swapped, c.dtype));
    transpose01(cpu_ec, in, out);
    transpose01(gec, gpu(in), gout);
    EXPECT_TRUE(bitwise_equal(out, gout));
  }
}

TEST(CudaTranspose, RefusesAnOutputOverItsInput) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  Tensor t = gpu(Tensor::zeros({4, 4}));
  EXPECT_THROW(transpose01(gec, t, t), Error);
}

}  // namespace
}  // namespace weft::kernels
