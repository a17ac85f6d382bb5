// MoeMLP at TP=1 (f32): the forward against a naive per-token loop, and the
// input's and every parameter's gradient (router, experts, norm; the
// auxiliary losses included) against finite differences, dropless and with
// capacity drops. TP equivalence is the "moe" family of gpt_cases.cpp.
#include "weft/nn/moe_mlp.h"

#include <gtest/gtest.h>

#include <cmath>

#include "contexts.h"
#include "testing.h"
#include "weft/core/threads.h"

namespace weft::nn::testing {
namespace {

using weft::testing::close;
using weft::testing::finite_difference;
using weft::testing::random_tensor;
using weft::testing::Tolerance;
using weft::testing::weighted_sum;

constexpr int64_t B = 2, T = 5, C = 8, H = 6, E = 4;

class MoeMLPTest : public ::testing::Test {
 protected:
  void SetUp() override { set_num_threads(1); }
  void TearDown() override { set_num_threads(0); }
};

MoeMLPConfig config(MlpKind act, NormKind norm, int64_t k) {
  return {.name = "mlp",
          .norm_name = "ln",
          .width = C,
          .hidden = H,
          .norm = norm,
          .activation = act,
          .init_std = 0.4f,
          .experts = E,
          .top_k = k,
          .aux_coef = 0.5f,
          .z_coef = 0.25f};
}

std::vector<float> matvec(const std::vector<float>& w, const std::vector<float>& x, int64_t rows) {
  const int64_t cols = static_cast<int64_t>(x.size());
  std::vector<float> y(static_cast<size_t>(rows), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0.0;
    for (int64_t c = 0; c < cols; ++c)
      s += static_cast<double>(w[static_cast<size_t>(r * cols + c)]) * x[static_cast<size_t>(c)];
    y[static_cast<size_t>(r)] = static_cast<float>(s);
  }
  return y;
}

// One token through RMSNorm, the router and its two experts (SwiGLU).
std::vector<float> naive_token(MoeMLP& m, std::vector<float> x) {
  double ms = 0.0;
  for (float v : x) ms += static_cast<double>(v) * v / C;
  const std::vector<float> gamma = m.children()[0]->parameters()[0]->value.to_vector();
  for (int64_t c = 0; c < C; ++c) {
    x[static_cast<size_t>(c)] =
        static_cast<float>(x[static_cast<size_t>(c)] / std::sqrt(ms + 1e-5)) *
        gamma[static_cast<size_t>(c)];
  }
  const std::vector<float> l = matvec(m.router().linear().weight().value.to_vector(), x, E);
  int a = 0;
  for (int e = 1; e < E; ++e) a = l[static_cast<size_t>(e)] > l[static_cast<size_t>(a)] ? e : a;
  int b = a == 0 ? 1 : 0;
  for (int e = 0; e < E; ++e)
    b = e != a && l[static_cast<size_t>(e)] > l[static_cast<size_t>(b)] ? e : b;
  const double ga = 1.0 / (1.0 + std::exp(l[static_cast<size_t>(b)] - l[static_cast<size_t>(a)]));
  std::vector<float> y(static_cast<size_t>(C), 0.0f);
  for (auto [e, g] : {std::pair{a, ga}, std::pair{b, 1.0 - ga}}) {
    const std::vector<float> h = matvec(m.fc1().weight(e).value.to_vector(), x, 2 * H);
    std::vector<float> act(static_cast<size_t>(H));
    for (int64_t i = 0; i < H; ++i) {
      const float gate = h[static_cast<size_t>(i)], up = h[static_cast<size_t>(H + i)];
      act[static_cast<size_t>(i)] = gate / (1.0f + std::exp(-gate)) * up;
    }
    const std::vector<float> o = matvec(m.fc2().weight(e).value.to_vector(), act, C);
    for (int64_t c = 0; c < C; ++c)
      y[static_cast<size_t>(c)] += static_cast<float>(g) * o[static_cast<size_t>(c)];
  }
  return y;
}

TEST_F(MoeMLPTest, MatchesNaivePerTokenLoop) {
  MoeMLP m(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 3),
           config(MlpKind::swiglu, NormKind::rms, 2));
  Tensor x = random_tensor({B, T, C}, 1);
  Ctx ctx;
  const std::vector<float> y = m.forward(ctx, x).to_vector(), xv = x.to_vector();
  std::vector<double> expected;
  for (int64_t n = 0; n < B * T; ++n) {
    const auto row = naive_token(m, {xv.begin() + n * C, xv.begin() + (n + 1) * C});
    expected.insert(expected.end(), row.begin(), row.end());
  }
  EXPECT_TRUE(close(expected, y, Tolerance{1e-4, 1e-5}));
}

// The gradients of Σ w·y + the weighted auxiliary losses.
void expect_gradients(MoeMLP& m) {
  Tensor x = random_tensor({B, T, C}, 7);
  Ctx ctx;
  Tensor y = m.forward(ctx, x);
  Tensor w = random_tensor(y.shape(), 8);
  m.zero_grad();
  Tensor dx = m.backward(ctx, w);
  auto loss = [&] {
    Ctx c;
    const double s = weighted_sum(m.forward(c, x), w);
    return s + m.router().weighted_aux_loss(c);
  };
  auto check = [&](Tensor& t, const Tensor& g) {
    double scale = 1e-2;
    for (float v : g.to_vector()) scale = std::max(scale, static_cast<double>(std::abs(v)));
    EXPECT_TRUE(
        close(finite_difference(t, loss, 1e-3), g.to_vector(), Tolerance{3e-3, 2e-4}, scale));
  };
  {
    SCOPED_TRACE("input");
    check(x, dx);
  }
  for (Parameter* p : m.parameters()) {
    SCOPED_TRACE(p->name);
    check(p->value, p->grad);
  }
}

TEST_F(MoeMLPTest, GradientsSwigluTop2) {
  MoeMLP m(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 4),
           config(MlpKind::swiglu, NormKind::rms, 2));
  expect_gradients(m);
}

TEST_F(MoeMLPTest, GradientsGeluTop1WithCapacityDrops) {
  MoeMLPConfig cfg = config(MlpKind::gelu, NormKind::layer, 1);
  cfg.capacity_factor = 1.0f;  // 3 tokens per expert of 10
  MoeMLP m(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 5), cfg);
  expect_gradients(m);
  Ctx ctx;
  m.forward(ctx, random_tensor({B, T, C}, 7));
  int64_t kept = 0;
  for (int64_t c : m.router().last_counts()) {
    EXPECT_LE(c, 3);
    kept += c;
  }
  EXPECT_LT(kept, B * T);  // some tokens were dropped, and pass with a zero output
}

}  // namespace
}  // namespace weft::nn::testing
