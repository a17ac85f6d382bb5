// Mixture-of-Experts pieces at TP=1: the router's routing and gradients
// against a naive reference and finite differences (aux and z losses
// included), its tie-breaking and capacity drops; GroupedLinear against
// per-expert products.
#include <gtest/gtest.h>

#include <cmath>

#include "contexts.h"
#include "testing.h"
#include "weft/kernels/gemm.h"
#include "weft/nn/grouped_linear.h"
#include "weft/nn/router.h"

namespace weft::nn::testing {
namespace {

using weft::testing::close;
using weft::testing::random_tensor;
using weft::testing::Tolerance;

constexpr int64_t N = 7, E = 4;

std::vector<float> random_logits(uint32_t seed) {
  return random_tensor({N, E}, seed, -2.0f, 2.0f).to_vector();
}

// The reference: the top-k of each row by sorting (value desc, index asc),
// gates by the documented rule, losses by their formulas, in double.
void expect_naive(const std::vector<float>& l, int64_t k, const Routing& r) {
  std::vector<double> mean_p(E, 0.0), routed(E, 0.0);
  double z = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    std::vector<std::pair<float, int>> row;
    double sum = 0.0;
    for (int e = 0; e < E; ++e) {
      row.push_back({l[static_cast<size_t>(n * E + e)], e});
      sum += std::exp(static_cast<double>(l[static_cast<size_t>(n * E + e)]));
    }
    std::sort(row.begin(), row.end(), [](auto a, auto b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    for (int e = 0; e < E; ++e) {
      mean_p[static_cast<size_t>(e)] += std::exp(l[static_cast<size_t>(n * E + e)]) / sum / N;
    }
    z += std::log(sum) * std::log(sum) / N;
    double top = 0.0;
    for (int64_t j = 0; j < k; ++j) top += std::exp(static_cast<double>(row[j].first));
    for (int64_t j = 0; j < k; ++j) {
      const size_t s = static_cast<size_t>(n * k + j);
      EXPECT_EQ(r.expert[s], row[static_cast<size_t>(j)].second);
      const double g =
          std::exp(static_cast<double>(row[static_cast<size_t>(j)].first)) / (k == 1 ? sum : top);
      EXPECT_NEAR(r.gate[s], g, 1e-6);
      routed[static_cast<size_t>(row[static_cast<size_t>(j)].second)] += 1.0;
    }
  }
  double aux = 0.0;
  for (int e = 0; e < E; ++e)
    aux += routed[static_cast<size_t>(e)] / N * mean_p[static_cast<size_t>(e)];
  EXPECT_NEAR(r.aux_loss, E * aux, 1e-5);
  EXPECT_NEAR(r.z_loss, z, 1e-5 * z);
}

TEST(Router, MatchesNaiveTopK) {
  for (int64_t k : {1, 2}) {
    SCOPED_TRACE(k);
    const std::vector<float> l = random_logits(3);
    const Routing r = route_tokens(l, N, {.experts = E, .top_k = k, .z_loss = true});
    expect_naive(l, k, r);
    // Dropless: every slot kept, dispatched by (expert, token).
    EXPECT_EQ(r.order.size(), static_cast<size_t>(N * k));
    for (size_t i = 1; i < r.order.size(); ++i) {
      const auto a = r.order[i - 1], b = r.order[i];
      const auto ea = r.expert[static_cast<size_t>(a)], eb = r.expert[static_cast<size_t>(b)];
      EXPECT_TRUE(ea < eb || (ea == eb && a < b));
    }
  }
}

TEST(Router, TiesGoToTheLowerExpert) {
  const std::vector<float> l(N * E, 0.5f);
  const Routing r = route_tokens(l, N, {.experts = E, .top_k = 2});
  for (int64_t n = 0; n < N; ++n) {
    EXPECT_EQ(r.expert[static_cast<size_t>(2 * n)], 0);
    EXPECT_EQ(r.expert[static_cast<size_t>(2 * n + 1)], 1);
    EXPECT_FLOAT_EQ(r.gate[static_cast<size_t>(2 * n)], 0.5f);
  }
  EXPECT_EQ(r.counts, (std::vector<int64_t>{N, N, 0, 0}));
}

TEST(Router, CapacityDropsLaterTokensAndSecondChoices) {
  // Every token prefers expert 0, then 1: capacity ceil(1.0 · 7 · 2 / 4) = 4.
  std::vector<float> l;
  for (int64_t n = 0; n < N; ++n) l.insert(l.end(), {3.0f, 2.0f, 0.0f, -1.0f});
  const Routing r = route_tokens(l, N, {.experts = E, .top_k = 2, .capacity_factor = 1.0f});
  EXPECT_EQ(r.counts, (std::vector<int64_t>{4, 4, 0, 0}));
  EXPECT_EQ(r.routed, (std::vector<int64_t>{N, N, 0, 0}));
  for (int64_t n = 0; n < N; ++n) {
    EXPECT_EQ(r.kept[static_cast<size_t>(2 * n)], n < 4 ? 1 : 0);
    EXPECT_EQ(r.kept[static_cast<size_t>(2 * n + 1)], n < 4 ? 1 : 0);
  }
}

TEST(Router, BackwardMatchesFiniteDifferences) {
  constexpr float kAux = 0.3f, kZ = 0.2f;
  for (int64_t k : {1, 2}) {
    SCOPED_TRACE(k);
    std::vector<float> l = random_logits(11);
    const std::vector<float> w = random_tensor({N, k}, 12).to_vector();
    const RoutingOptions opt{.experts = E, .top_k = k, .z_loss = true};
    auto loss = [&]() {
      const Routing r = route_tokens(l, N, opt);
      double s = kAux * r.aux_loss + kZ * r.z_loss;
      for (size_t i = 0; i < w.size(); ++i) s += static_cast<double>(w[i]) * r.gate[i];
      return s;
    };
    const std::vector<float> dl = route_backward(route_tokens(l, N, opt), w, kAux, kZ);
    std::vector<double> fd(l.size());
    for (size_t i = 0; i < l.size(); ++i) {
      const float keep = l[i];
      l[i] = keep + 1e-2f;
      const double up = loss();
      l[i] = keep - 1e-2f;
      fd[i] = (up - loss()) / 2e-2;
      l[i] = keep;
    }
    EXPECT_TRUE(close(fd, dl, Tolerance{1e-2, 1e-4}));
  }
}

TEST(GroupedLinear, MatchesPerExpertProducts) {
  auto pc = ctx_of();
  GroupedLinear g(pc, {.name = "m", .experts = E, .in = 5, .out = 3});
  const std::vector<int64_t> counts{3, 0, 2, 1};
  Tensor x = on_test_device(random_tensor({6, 5}, 1));
  Tensor dy = on_test_device(random_tensor({6, 3}, 2));
  Ctx ctx;
  const std::vector<float> y = g.forward(ctx, x, counts).to_vector();
  const std::vector<float> dx = g.backward(ctx, dy).to_vector();
  const std::vector<float> xv = x.to_vector(), dyv = dy.to_vector();
  int64_t row = 0;
  for (int64_t e = 0; e < E; ++e) {
    const std::vector<float> w = g.weight(e).value.to_vector();
    std::vector<double> dw(15, 0.0);
    for (int64_t n = row; n < row + counts[static_cast<size_t>(e)]; ++n) {
      for (int64_t o = 0; o < 3; ++o) {
        double s = 0.0;
        for (int64_t i = 0; i < 5; ++i) {
          s += static_cast<double>(xv[static_cast<size_t>(n * 5 + i)]) *
               w[static_cast<size_t>(o * 5 + i)];
          dw[static_cast<size_t>(o * 5 + i)] +=
              static_cast<double>(dyv[static_cast<size_t>(n * 3 + o)]) *
              xv[static_cast<size_t>(n * 5 + i)];
        }
        EXPECT_NEAR(y[static_cast<size_t>(n * 3 + o)], s, 1e-5);
      }
      for (int64_t i = 0; i < 5; ++i) {
        double s = 0.0;
        for (int64_t o = 0; o < 3; ++o) {
          s += static_cast<double>(dyv[static_cast<size_t>(n * 3 + o)]) *
               w[static_cast<size_t>(o * 5 + i)];
        }
        EXPECT_NEAR(dx[static_cast<size_t>(n * 5 + i)], s, 1e-5);
      }
    }
    EXPECT_TRUE(close(dw, g.weight(e).grad.to_vector(), Tolerance{1e-5, 1e-6}));
    EXPECT_EQ(g.weight(e).name, format("m.experts.{}.weight", e));
    row += counts[static_cast<size_t>(e)];
  }
}

// Under bf16 the experts' products (read from packed weights where the CPU
// packs them) are bit for bit those of kernels::gemm on each expert's cast
// weight and row block, over passes that reuse the casts and after the
// weights change.
TEST(GroupedLinear, Bf16EqualsPerExpertGemmsBitForBit) {
  auto pc = ctx_of(nullptr, parallel::SequenceParallel::off, DType::bf16);
  const int64_t in = 48, out = 80;
  GroupedLinear g(pc, {.name = "m", .experts = E, .in = in, .out = out});
  const std::vector<int64_t> counts{37, 0, 1, 64};
  const ExecContext& ec = pc->exec;
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(format("step {}", step));
    if (step == 2) {  // an optimizer step: new values, a new version
      for (int64_t e = 0; e < E; ++e) {
        Parameter& w = g.weight(e);
        w.value.copy_from(random_tensor(w.value.shape(), 90 + static_cast<uint32_t>(e)));
        ++w.version;
      }
    }
    std::vector<Tensor> grads_before;
    for (int64_t e = 0; e < E; ++e) grads_before.push_back(g.weight(e).grad.clone());
    Tensor x = on_test_device(random_tensor({102, in}, 10 + step, -1, 1, DType::bf16));
    Tensor dy = on_test_device(random_tensor({102, out}, 20 + step, -1, 1, DType::bf16));
    Ctx ctx;
    ctx.set_reuse_weight_casts(true);
    const Tensor y = g.forward(ctx, x, counts);
    const Tensor dx = g.backward(ctx, dy);
    int64_t row = 0;
    for (int64_t e = 0; e < E; ++e) {
      const int64_t n = counts[static_cast<size_t>(e)];
      const Tensor w = g.weight(e).value.to(DType::bf16);
      Tensor ye = ec.zeros({n, out}, DType::bf16), dxe = ec.zeros({n, in}, DType::bf16);
      Tensor dw = grads_before[static_cast<size_t>(e)];
      kernels::gemm(ec, x.rows(row, n), w, ye, {.trans_b = true});
      kernels::gemm(ec, dy.rows(row, n), w, dxe);
      kernels::gemm(ec, dy.rows(row, n), x.rows(row, n), dw, {.trans_a = true, .accumulate = true});
      EXPECT_EQ(y.rows(row, n).to_vector(), ye.to_vector()) << "expert " << e;
      EXPECT_EQ(dx.rows(row, n).to_vector(), dxe.to_vector()) << "expert " << e;
      EXPECT_EQ(g.weight(e).grad.to_vector(), dw.to_vector()) << "expert " << e;
      row += n;
    }
  }
}

}  // namespace
}  // namespace weft::nn::testing
