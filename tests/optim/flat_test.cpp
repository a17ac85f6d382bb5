// AdamW over flat moment buffers and the one-pass gradient norm: the same bits
// as stepping and summing parameter by parameter.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "bitwise.h"
#include "testing.h"
#include "weft/core/threads.h"
#include "weft/kernels/optimizer.h"
#include "weft/optim/adamw.h"
#include "weft/optim/grad_norm.h"

namespace weft::optim {
namespace {

using weft::testing::bitwise_equal;
using weft::testing::random_tensor;

// A model's worth of parameters: many small ones (biases, norms), odd sizes
// and a few large 2-D weights; 2-D ones decay, as the models mark them.
std::vector<nn::Parameter> make_params(uint32_t seed) {
  std::vector<Shape> shapes = {{97, 131}, {5}, {1}, {64, 48}, {0}, {300, 700}, {7, 3}};
  for (int i = 0; i < 120; ++i) shapes.push_back(Shape{1 + (i * 5) % 29});
  std::vector<nn::Parameter> ps;
  for (size_t i = 0; i < shapes.size(); ++i) {
    nn::ShardSpec spec;
    spec.global_shape = shapes[i];
    const auto k = seed + 2 * static_cast<uint32_t>(i);
    ps.push_back(nn::make_parameter("p" + std::to_string(i), random_tensor(shapes[i], k), spec,
                                    shapes[i].rank() == 2));
    ps.back().grad.copy_from(random_tensor(shapes[i], k + 1, -2.0f, 2.0f));
  }
  return ps;
}

std::vector<nn::Parameter*> pointers(std::vector<nn::Parameter>& ps) {
  std::vector<nn::Parameter*> out;
  for (nn::Parameter& p : ps) out.push_back(&p);
  return out;
}

TEST(FlatAdamW, MomentsAreViewsOfOneBufferEach) {
  std::vector<nn::Parameter> ps = make_params(1);
  AdamW opt(pointers(ps), {});
  const auto& m = opt.first_moments();
  const auto& v = opt.second_moments();
  ASSERT_EQ(m.size(), ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(m[i].shape(), ps[i].value.shape()) << ps[i].name;
    EXPECT_EQ(v[i].shape(), ps[i].value.shape()) << ps[i].name;
    EXPECT_TRUE(m[i].same_storage(m[0])) << ps[i].name;
    EXPECT_TRUE(v[i].same_storage(v[0])) << ps[i].name;
    EXPECT_FALSE(m[i].same_storage(v[0])) << ps[i].name;
    // In parameter order, each stretch 64-byte aligned and past the last.
    const auto at = reinterpret_cast<uintptr_t>(m[i].raw());
    EXPECT_EQ((at - reinterpret_cast<uintptr_t>(m[0].raw())) % 64, 0u) << ps[i].name;
    if (i > 0) {
      EXPECT_GE(at, reinterpret_cast<uintptr_t>(m[i - 1].raw()) + m[i - 1].nbytes()) << ps[i].name;
    }
  }
}

// Per parameter: the single-tensor kernel on separate moment tensors, one
// thread. The flat optimizer: the same bits at any thread count, decay on
// and off, with moments written through the views first (a checkpoint load).
TEST(FlatAdamW, EqualsPerParameterStepsBitwise) {
  for (const float weight_decay : {0.1f, 0.0f}) {
    std::vector<nn::Parameter> ref = make_params(7);
    std::vector<Tensor> m, v;
    for (size_t i = 0; i < ref.size(); ++i) {
      m.push_back(
          random_tensor(ref[i].value.shape(), 1000 + static_cast<uint32_t>(i), -0.1f, 0.1f));
      v.push_back(
          random_tensor(ref[i].value.shape(), 2000 + static_cast<uint32_t>(i), 0.0f, 0.01f));
    }
    std::vector<Tensor> m0, v0;
    for (size_t i = 0; i < ref.size(); ++i) {
      m0.push_back(m[i].clone());
      v0.push_back(v[i].clone());
    }
    set_num_threads(1);
    for (int64_t step = 4; step <= 6; ++step) {
      const float scale = step == 5 ? 0.25f : 1.0f;
      for (size_t i = 0; i < ref.size(); ++i) {
        kernels::adamw_step(ExecContext::host(), ref[i].value, ref[i].grad, m[i], v[i],
                            {.lr = 1e-2f,
                             .weight_decay = ref[i].decay ? weight_decay : 0.0f,
                             .step = step,
                             .grad_scale = scale});
      }
    }
    for (const int threads : {1, 2, 3}) {
      set_num_threads(threads);
      std::vector<nn::Parameter> ps = make_params(7);
      AdamW opt(pointers(ps), {.weight_decay = weight_decay});
      for (size_t i = 0; i < ps.size(); ++i) {
        opt.first_moments()[i].copy_from(m0[i]);
        opt.second_moments()[i].copy_from(v0[i]);
      }
      opt.set_steps_taken(3);
      for (int64_t step = 4; step <= 6; ++step) opt.step(1e-2f, step == 5 ? 0.25f : 1.0f);
      for (size_t i = 0; i < ps.size(); ++i) {
        const std::string what = ps[i].name + ", weight_decay " + std::to_string(weight_decay) +
                                 ", " + std::to_string(threads) + " threads";
        EXPECT_TRUE(bitwise_equal(ref[i].value, ps[i].value)) << what;
        EXPECT_TRUE(bitwise_equal(m[i], opt.first_moments()[i])) << what;
        EXPECT_TRUE(bitwise_equal(v[i], opt.second_moments()[i])) << what;
        EXPECT_EQ(ps[i].version, 3u) << what;
      }
    }
    set_num_threads(0);
  }
}

TEST(FlatAdamW, NoParametersIsNoWork) {
  AdamW opt({}, {});
  opt.step(1e-3f);
  EXPECT_EQ(opt.steps_taken(), 1);
  EXPECT_TRUE(opt.first_moments().empty());
}

// The norm in one pass: within 1e-12 of a long-double reference, and the
// bits of the per-parameter sums added in parameter order (the computation
// it replaced) at any thread count.
TEST(FlatGradNorm, MatchesAnExtendedPrecisionReferenceAndThePerParameterSum) {
  std::vector<nn::Parameter> ps = make_params(3);
  const std::vector<nn::Parameter*> ptrs = pointers(ps);
  long double reference = 0;
  double per_parameter = 0;
  for (const nn::Parameter& p : ps) {
    for (float g : p.grad.to_vector()) reference += static_cast<long double>(g) * g;
    per_parameter += kernels::sum_of_squares(ExecContext::host(), p.grad);
  }
  const double expected = std::sqrt(static_cast<double>(reference));
  for (const int threads : {1, 2, 3, 8}) {
    set_num_threads(threads);
    const double norm = global_grad_norm(ptrs, {});
    EXPECT_NEAR(norm, expected, 1e-12 * expected) << threads << " threads";
    EXPECT_EQ(norm, std::sqrt(per_parameter)) << threads << " threads";
  }
  set_num_threads(0);
}

}  // namespace
}  // namespace weft::optim
