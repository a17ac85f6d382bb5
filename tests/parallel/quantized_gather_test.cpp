// The quantized GTP gather equals quantize-after-gather: every rank
// quantizes its (zero-padded) shard and gathers data and scales; the result
// is bit for bit the whole weight quantized, for each recipe, at gtp 2 and 4,
// with rows that are not a multiple of the block rows times N.
#include "weft/parallel/gtp/quantized_gather.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "testing.h"
#include "weft/comm/local.h"
#include "weft/parallel/context.h"

namespace weft::parallel::gtp {
namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())) == 0;
}

TEST(QuantizedGtpGather, EqualsQuantizeAfterGather) {
  const int64_t rows = 50, cols = 96;
  const Tensor w = weft::testing::random_tensor({rows, cols}, 11);
  const std::vector<float> wv = w.to_vector();
  for (Recipe r : {Recipe::fp8_delayed, Recipe::fp8_current, Recipe::mxfp8, Recipe::nvfp4}) {
    for (bool col : {false, true}) {
      // The reference: the whole weight quantized (a high-precision gather).
      auto ref_pc = make_context(nullptr, SequenceParallel::off, Precision::of(r), 5);
      GemmQuantizer ref_q(*ref_pc, "w", nullptr);
      PassContext ref_pass;
      const QuantizedTensor ref = ref_q.quantized(GemmQuantizer::Operand::weight, w, col, ref_pass);
      for (int n : {2, 4}) {
        SCOPED_TRACE(std::string(recipe_name(r)) + " gtp " + std::to_string(n) +
                     (col ? " column-wise" : " row-wise"));
        const int64_t align = std::max<int64_t>(16, quantized_row_alignment(r));
        const int64_t s = (rows + align * n - 1) / (align * n) * align;
        comm::run_local(n, [&](comm::ProcessGroup& world) {
          std::vector<float> sv(static_cast<size_t>(s * cols), 0.0f);
          const int64_t start = world.rank() * s;
          for (int64_t i = 0; i < s && start + i < rows; ++i) {
            std::copy_n(wv.begin() + (start + i) * cols, cols, sv.begin() + i * cols);
          }
          const Tensor shard = Tensor::from({s, cols}, sv);
          auto pc = make_context(nullptr, SequenceParallel::off, Precision::of(r), 5);
          GemmQuantizer q(*pc, "w", nullptr);
          PassContext pass;
          const QuantizedGather g = gather_quantized(q, world, shard, rows, col, pass);
          const QuantizedTensor& got = g.weight;
          EXPECT_EQ(got.rows, ref.rows);
          EXPECT_EQ(got.cols, ref.cols);
          EXPECT_EQ(got.tensor_scale_inv, ref.tensor_scale_inv);
          EXPECT_EQ(got.has_rowwise(), ref.has_rowwise());
          EXPECT_EQ(got.has_columnwise(), ref.has_columnwise());
          if (ref.has_rowwise()) {
            EXPECT_TRUE(same_bytes(got.data, ref.data));
            EXPECT_TRUE(same_bytes(got.scale_inv, ref.scale_inv));
          }
          if (ref.has_columnwise()) {
            EXPECT_TRUE(same_bytes(got.col_data, ref.col_data));
            EXPECT_TRUE(same_bytes(got.col_scale_inv, ref.col_scale_inv));
          }
          // And the operand the GEMM multiplies.
          EXPECT_EQ(q.operand_of(got, col).to_vector(), ref_q.operand_of(ref, col).to_vector());
          // Bytes moved per element: fp8 1 (+ the scale), MXFP8 1 + 1/32,
          // NVFP4 16x16 0.5 + 1/256 (+ the per-tensor scale); bf16 would be 2.
          const double per = g.bytes_per_element();
          const double expected = r == Recipe::mxfp8   ? 1.0 + 1.0 / 32
                                  : r == Recipe::nvfp4 ? 0.5 + 1.0 / 256
                                                       : 1.0;
          EXPECT_NEAR(per, expected, 4.0 / static_cast<double>(s * cols) + 1e-12);
          EXPECT_LT(per, 2.0);
        });
      }
    }
  }
}

}  // namespace
}  // namespace weft::parallel::gtp
