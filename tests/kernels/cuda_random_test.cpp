// The CUDA Philox kernels against the CPU ones: the same stream elements,
// so fill_uniform and dropout (masks and values) are bitwise the CPU's.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "bitwise.h"
#include "cuda_testing.h"
#include "testing.h"
#include "weft/kernels/random.h"

namespace weft::kernels {
namespace {

using weft::testing::bitwise_equal;
using weft::testing::gpu;
using weft::testing::random_tensor;

const ExecContext& cpu_ec = ExecContext::host();

TEST(CudaRandom, FillUniformMatchesCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  struct Case {
    int64_t n;
    uint64_t seed, offset;
  };
  // Offsets that start and end inside a Philox block, a 64-bit seed, and an
  // offset past 2^32 blocks (the counter's high word).
  const std::vector<Case> cases = {{1, 7, 0},
                                   {3, 7, 1},
                                   {1003, 0x123456789abcdefULL, 5},
                                   {1 << 20, 42, 0},
                                   {37 * 771, 42, (uint64_t{1} << 34) + 3}};
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.n << " numbers at offset " << c.offset);
    Tensor out = Tensor::empty({c.n}), gout = gpu(Tensor::zeros({c.n}));
    fill_uniform(cpu_ec, c.seed, c.offset, out);
    fill_uniform(gec, c.seed, c.offset, gout);
    EXPECT_TRUE(bitwise_equal(out, gout));
  }
}

TEST(CudaRandom, DropoutMatchesCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  for (const DType dtype : {DType::f32, DType::bf16}) {
    for (const float p : {0.0f, 0.1f, 0.5f}) {
      for (const Shape& shape : {Shape{37, 771}, Shape{8, 1024, 768}}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " p " << p << " " << shape);
        const Tensor x = random_tensor(shape, 1, -2, 2, dtype);
        Tensor y = Tensor::empty(shape, dtype), mask = Tensor::empty(shape, DType::u8);
        Tensor gy = gpu(Tensor::zeros(shape, dtype)), gmask = gpu(Tensor::zeros(shape, DType::u8));
        dropout_forward(cpu_ec, x, p, 1234, 7, y, mask);
        dropout_forward(gec, gpu(x), p, 1234, 7, gy, gmask);
        EXPECT_TRUE(bitwise_equal(mask, gmask));
        EXPECT_TRUE(bitwise_equal(y, gy));

        const Tensor dy = random_tensor(shape, 2, -1, 1, dtype);
        Tensor dx = Tensor::empty(shape, dtype), gdx = gpu(Tensor::zeros(shape, dtype));
        dropout_backward(cpu_ec, dy, mask, p, dx);
        dropout_backward(gec, gpu(dy), gmask, p, gdx);
        EXPECT_TRUE(bitwise_equal(dx, gdx));
      }
    }
  }
}

}  // namespace
}  // namespace weft::kernels
