// The multi-tensor AdamW step and sums of squares against the single-tensor
// kernels, bit for bit: odd sizes, many small tensors, decay on and off, any
// thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "bitwise.h"
#include "testing.h"
#include "weft/core/threads.h"
#include "weft/kernels/optimizer.h"

namespace weft::kernels {
namespace {

const ExecContext& ec = ExecContext::host();

using weft::testing::bitwise_equal;
using weft::testing::random_tensor;

// Odd sizes around the sum's 65536-element blocks and the vector widths,
// empty tensors, and 300 small ones (1 to 37 elements) between them.
std::vector<int64_t> mixed_sizes() {
  std::vector<int64_t> sizes = {1, 0, 7, 15, 16, 17, 65535, 65536, 65537, 3, 100003, 0, 513};
  for (int i = 0; i < 300; ++i) sizes.push_back(1 + (i * 7) % 37);
  sizes.push_back(200001);
  return sizes;
}

struct State {
  std::vector<Tensor> p, g, m, v;
  std::vector<bool> decay;
};

State make_state(const std::vector<int64_t>& sizes, uint32_t seed) {
  State s;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const uint32_t k = seed + 4 * static_cast<uint32_t>(i);
    s.p.push_back(random_tensor({sizes[i]}, k));
    s.g.push_back(random_tensor({sizes[i]}, k + 1, -2.0f, 2.0f));
    // Moments of a run already under way: v > 0.
    s.m.push_back(random_tensor({sizes[i]}, k + 2, -0.1f, 0.1f));
    s.v.push_back(random_tensor({sizes[i]}, k + 3, 0.0f, 0.01f));
    s.decay.push_back(i % 3 != 1);
  }
  return s;
}

State clone(const State& s) {
  State c;
  c.decay = s.decay;
  for (size_t i = 0; i < s.p.size(); ++i) {
    c.p.push_back(s.p[i].clone());
    c.g.push_back(s.g[i]);
    c.m.push_back(s.m[i].clone());
    c.v.push_back(s.v[i].clone());
  }
  return c;
}

std::vector<AdamWSegment> segments_of(State& s) {
  std::vector<AdamWSegment> segments;
  for (size_t i = 0; i < s.p.size(); ++i) {
    segments.push_back(
        {.params = &s.p[i], .grads = &s.g[i], .m = &s.m[i], .v = &s.v[i], .decay = s.decay[i]});
  }
  return segments;
}

void expect_bitwise(const State& expected, const State& got, const std::string& what) {
  for (size_t i = 0; i < expected.p.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(expected.p[i], got.p[i])) << what << ", params of tensor " << i;
    EXPECT_TRUE(bitwise_equal(expected.m[i], got.m[i])) << what << ", m of tensor " << i;
    EXPECT_TRUE(bitwise_equal(expected.v[i], got.v[i])) << what << ", v of tensor " << i;
  }
}

TEST(AdamWMulti, EqualsTheSingleTensorStepBitwise) {
  const State start = make_state(mixed_sizes(), 11);
  for (const float weight_decay : {0.1f, 0.0f}) {
    AdamWConfig cfg{.lr = 3e-3f, .weight_decay = weight_decay};
    // The reference: one single-tensor step per tensor, on one thread.
    State ref = clone(start);
    set_num_threads(1);
    for (int64_t step = 1; step <= 3; ++step) {
      cfg.step = step;
      cfg.grad_scale = step == 2 ? 0.3f : 1.0f;
      for (size_t i = 0; i < ref.p.size(); ++i) {
        AdamWConfig one = cfg;
        one.weight_decay = ref.decay[i] ? weight_decay : 0.0f;
        adamw_step(ec, ref.p[i], ref.g[i], ref.m[i], ref.v[i], one);
      }
    }
    for (const int threads : {1, 2, 3, 7}) {
      set_num_threads(threads);
      State got = clone(start);
      const std::vector<AdamWSegment> segments = segments_of(got);
      for (int64_t step = 1; step <= 3; ++step) {
        cfg.step = step;
        cfg.grad_scale = step == 2 ? 0.3f : 1.0f;
        adamw_step_multi(ec, segments, cfg);
      }
      expect_bitwise(ref, got,
                     "weight_decay " + std::to_string(weight_decay) + ", " +
                         std::to_string(threads) + " threads");
    }
    set_num_threads(0);
  }
}

TEST(AdamWMulti, DecaysOnlyTheMarkedSegments) {
  // Zero gradients and moments: decay alone moves the marked segment.
  Tensor a = Tensor::full({5}, 2.0f), b = Tensor::full({5}, 2.0f);
  Tensor g = Tensor::zeros({5}), ma = Tensor::zeros({5}), va = Tensor::zeros({5});
  Tensor mb = Tensor::zeros({5}), vb = Tensor::zeros({5});
  const std::vector<AdamWSegment> segments = {
      {.params = &a, .grads = &g, .m = &ma, .v = &va, .decay = true},
      {.params = &b, .grads = &g, .m = &mb, .v = &vb, .decay = false}};
  adamw_step_multi(ec, segments, {.lr = 0.5f, .weight_decay = 0.5f});
  EXPECT_EQ(a.to_vector(), std::vector<float>(5, 2.0f * 0.75f));
  EXPECT_EQ(b.to_vector(), std::vector<float>(5, 2.0f));
}

TEST(AdamWMulti, AnEmptyListDoesNothing) { EXPECT_NO_THROW(adamw_step_multi(ec, {}, {})); }

TEST(AdamWMulti, RejectsBadSegmentsNamingThem) {
  Tensor p = Tensor::zeros({8}), g = Tensor::zeros({8}), m = Tensor::zeros({8});
  Tensor v = Tensor::zeros({8}), short_v = Tensor::zeros({7});
  Tensor bf16_g = Tensor::zeros({8}, DType::bf16);
  const AdamWSegment good{.params = &p, .grads = &g, .m = &m, .v = &v};
  const auto error_of = [](const std::vector<AdamWSegment>& segments, const AdamWConfig& cfg) {
    try {
      adamw_step_multi(ec, segments, cfg);
    } catch (const weft::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  AdamWSegment bad = good;
  bad.v = &short_v;
  EXPECT_NE(error_of({good, bad}, {}).find("adamw_step_multi (entry 1): v must be f32 with 8"),
            std::string::npos)
      << error_of({good, bad}, {});
  bad = good;
  bad.grads = &bf16_g;
  EXPECT_NE(error_of({bad}, {}).find("(entry 0): grads must be f32"), std::string::npos);
  bad = good;
  bad.m = nullptr;
  EXPECT_NE(error_of({good, good, bad}, {}).find("(entry 2): params, grads, m and v"),
            std::string::npos);
  EXPECT_NE(error_of({good}, {.step = 0}).find("step is 1-based"), std::string::npos);
  EXPECT_NE(error_of({good}, {.beta2 = 1.0f}).find("betas must lie in [0, 1)"), std::string::npos);
  // Nothing ran.
  EXPECT_EQ(p.to_vector(), std::vector<float>(8, 0.0f));
}

TEST(AdamWMulti, RejectsTensorsOffTheContextsDevice) {
  const ExecContext cuda(Device::cuda(0), 0);
  Tensor p = Tensor::zeros({4}), g = Tensor::zeros({4}), m = Tensor::zeros({4});
  Tensor v = Tensor::zeros({4});
  const std::vector<AdamWSegment> segments = {{.params = &p, .grads = &g, .m = &m, .v = &v}};
  try {
    adamw_step_multi(cuda, segments, {});
    ADD_FAILURE() << "no error";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("(entry 0): params is on cpu but the execution context "
                                         "runs on cuda:0"),
              std::string::npos)
        << e.what();
  }
}

TEST(SumOfSquaresMulti, EqualsTheSingleTensorSumsBitwise) {
  const std::vector<int64_t> sizes = mixed_sizes();
  std::vector<Tensor> xs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    xs.push_back(random_tensor({sizes[i]}, 50 + static_cast<uint32_t>(i), -3.0f, 3.0f));
  }
  std::vector<double> single;
  set_num_threads(1);
  for (const Tensor& x : xs) single.push_back(sum_of_squares(ec, x));
  for (const int threads : {1, 2, 3, 8}) {
    set_num_threads(threads);
    const std::vector<double> multi = sum_of_squares_multi(ec, xs);
    ASSERT_EQ(multi.size(), xs.size());
    for (size_t i = 0; i < xs.size(); ++i) {
      EXPECT_EQ(multi[i], single[i])
          << "tensor " << i << " (" << sizes[i] << " elements), " << threads << " threads";
    }
  }
  set_num_threads(0);
}

TEST(SumOfSquaresMulti, MatchesFp64Reference) {
  // Shapes of every rank, sizes around the block size.
  const std::vector<Tensor> xs = {random_tensor({3, 65537}, 1, -2.0f, 2.0f), random_tensor({1}, 2),
                                  random_tensor({5, 7, 3}, 3), Tensor::zeros({0, 4}),
                                  random_tensor({2, 3, 4, 5}, 4, -9.0f, 9.0f)};
  const std::vector<double> got = sum_of_squares_multi(ec, xs);
  for (size_t i = 0; i < xs.size(); ++i) {
    long double expected = 0;
    for (float e : xs[i].to_vector()) expected += static_cast<long double>(e) * e;
    EXPECT_NEAR(got[i], static_cast<double>(expected), 1e-12 * static_cast<double>(expected))
        << "tensor " << i;
  }
  EXPECT_TRUE(sum_of_squares_multi(ec, {}).empty());
}

TEST(SumOfSquaresMulti, RejectsNonF32NamingTheTensor) {
  const std::vector<Tensor> xs = {Tensor::zeros({4}), Tensor::zeros({4}, DType::bf16)};
  try {
    sum_of_squares_multi(ec, xs);
    ADD_FAILURE() << "no error";
  } catch (const weft::Error& e) {
    EXPECT_NE(std::string(e.what()).find("sum_of_squares_multi (entry 1): x must be f32"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace weft::kernels
