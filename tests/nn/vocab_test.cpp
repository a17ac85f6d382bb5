// VocabParallelEmbedding, LmHead and the vocab-parallel cross-entropy at
// TP=1: padding, initialization, errors and finite-difference gradients.
// (TP equivalence: vocab_cases.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "contexts.h"
#include "testing.h"
#include "weft/comm/grid.h"
#include "weft/comm/local.h"
#include "weft/nn/cross_entropy.h"
#include "weft/nn/embedding.h"
#include "weft/parallel/rng.h"

namespace weft::nn {
namespace {

using comm::OpKind;
using weft::testing::close;
using weft::testing::finite_difference;
using weft::testing::kF32;
using weft::testing::random_tensor;

constexpr weft::testing::Tolerance kFd{2e-2, 2e-3};

EmbeddingConfig small_config(int64_t vocab = 10, int64_t pad = 8) {
  // std 1 so that the loss depends visibly on every weight.
  return {.vocab = vocab, .max_seq = 6, .channels = 4, .vocab_pad = pad, .init_std = 1.0f};
}

// The tests' models are built with seed 3.
parallel::ContextPtr ctx3(std::shared_ptr<comm::ProcessGroup> tp = nullptr,
                          SequenceParallel sp = SequenceParallel::off, DType dt = DType::f32) {
  return ctx_of(std::move(tp), sp, dt, 3);
}

Tensor ids(const Shape& shape, std::vector<int32_t> v) { return Tensor::from_i32(shape, v); }

// The message of the weft::Error that f throws ("" if it throws none).
using weft::testing::error_of;

TEST(VocabPadding, PadsToTheMultipleOnly) {
  EXPECT_EQ(padded_vocab_size(50), 128);
  EXPECT_EQ(padded_vocab_size(128), 128);
  EXPECT_EQ(padded_vocab_size(257), 384);
  EXPECT_EQ(padded_vocab_size(50257), 50304);
  EXPECT_EQ(padded_vocab_size(50, 8), 56);
  EXPECT_EQ(padded_vocab_size(50, 1), 50);
  EXPECT_THROW(padded_vocab_size(0), Error);
  EXPECT_THROW(padded_vocab_size(50, 0), Error);
}

TEST(VocabParallelEmbedding, RealRowsAreTheMasterAndPaddingIsZero) {
  VocabParallelEmbedding emb(ctx3(), small_config(10, 8));
  EXPECT_EQ(emb.wte().name, "wte.weight");
  EXPECT_EQ(emb.wpe().name, "wpe.weight");
  EXPECT_EQ(emb.wte().value.shape(), Shape({16, 4}));
  EXPECT_EQ(emb.wte().spec.global_shape, Shape({16, 4}));
  EXPECT_EQ(emb.wte().spec.valid_rows, 10);
  EXPECT_FALSE(emb.wte().spec.is_split());
  std::vector<float> master = parallel::normal_init({10, 4}, 3, "wte.weight", 1.0f).to_vector();
  std::vector<float> wte = emb.wte().value.to_vector();
  EXPECT_EQ(std::vector<float>(wte.begin(), wte.begin() + 40), master);
  for (size_t i = 40; i < wte.size(); ++i) ASSERT_EQ(wte[i], 0.0f);
  EXPECT_EQ(emb.wpe().value.to_vector(),
            parallel::normal_init({6, 4}, 3, "wpe.weight", 1.0f).to_vector());
  // Another padding multiple changes the number of zero rows only.
  VocabParallelEmbedding wide(ctx3(), small_config(10, 128));
  std::vector<float> wide_wte = wide.wte().value.to_vector();
  EXPECT_EQ(wide.padded_vocab(), 128);
  EXPECT_EQ(std::vector<float>(wide_wte.begin(), wide_wte.begin() + 40), master);
  // A named embedding prefixes its parameters.
  EmbeddingConfig named = small_config();
  named.name = "embed";
  VocabParallelEmbedding e2(ctx3(), named);
  EXPECT_EQ(e2.wte().name, "embed.wte.weight");
  EXPECT_EQ(e2.wpe().name, "embed.wpe.weight");
}

TEST(VocabParallelEmbedding, ForwardIsTokenRowPlusPosition) {
  VocabParallelEmbedding emb(ctx3(), small_config());
  Ctx ctx;
  Tensor tokens = ids({1, 3}, {9, 0, 4});
  Tensor x = emb.forward(ctx, tokens, 2);
  std::vector<float> wte = emb.wte().value.to_vector(), wpe = emb.wpe().value.to_vector();
  std::vector<float> y = x.to_vector();
  const int32_t tok[] = {9, 0, 4};
  for (int t = 0; t < 3; ++t) {
    for (int c = 0; c < 4; ++c) {
      EXPECT_EQ(y[static_cast<size_t>(t * 4 + c)], wte[static_cast<size_t>(tok[t] * 4 + c)] +
                                                       wpe[static_cast<size_t>((t + 2) * 4 + c)]);
    }
  }
}

TEST(VocabParallelEmbedding, Errors) {
  VocabParallelEmbedding emb(ctx3(), small_config(10, 8));
  Ctx ctx;
  // Ids in the padding are not tokens.
  EXPECT_NE(error_of([&] {
              emb.forward(ctx, ids({1, 2}, {1, 10}));
            }).find("outside the vocabulary"),
            std::string::npos);
  EXPECT_THROW(emb.forward(ctx, ids({1, 2}, {-1, 0})), Error);
  EXPECT_NE(error_of([&] {
              emb.forward(ctx, ids({1, 2}, {1, 2}), 5);
            }).find("context length"),
            std::string::npos);
  EXPECT_THROW(emb.backward(ctx, Tensor::zeros({1, 2, 4})), Error);
  EXPECT_THROW(emb.forward(ctx, Tensor::zeros({1, 2})), Error);  // f32 tokens
  EXPECT_THROW(VocabParallelEmbedding(ctx3(), small_config(0, 8)), Error);
  // 16 padded rows cannot be split over 3 ranks: the message names the fix.
  std::string msg = error_of([] {
    comm::run_local(3, [](comm::ProcessGroup& world) {
      EmbeddingConfig cfg = small_config(10, 8);
      VocabParallelEmbedding e(
          ctx3(std::shared_ptr<comm::ProcessGroup>(&world, [](comm::ProcessGroup*) {})), cfg);
    });
  });
  EXPECT_NE(msg.find("tp size 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("vocab_pad 24"), std::string::npos) << msg;  // nn names fields, not flags
  EXPECT_EQ(msg.find("--"), std::string::npos) << msg;
}

// loss(wte, wpe) = CE(x · wteᵀ, targets) with x = wte[tokens] + wpe.
struct LmFixture {
  VocabParallelEmbedding emb{ctx3(), small_config()};
  LmHead head{emb};
  Tensor tokens = ids({2, 4}, {1, 9, 3, 3, 0, 7, 2, 5});
  Tensor targets = ids({2, 4}, {9, 3, 3, -100, 7, 2, 5, 8});

  double loss() {
    Ctx ctx;
    return head.forward_loss(ctx, emb.forward(ctx, tokens), targets);
  }
  void backward() {
    emb.zero_grad();
    Ctx ctx;
    head.forward_loss(ctx, emb.forward(ctx, tokens), targets);
    emb.backward(ctx, head.backward_loss(ctx));
  }
};

TEST(VocabParallelEmbedding, TiedGradientsMatchFiniteDifferences) {
  LmFixture f;
  f.backward();
  std::vector<float> analytic = f.emb.wte().grad.to_vector();
  std::vector<double> numeric = finite_difference(
      f.emb.wte().value, [&] { return f.loss(); }, 1e-2);
  EXPECT_TRUE(close(numeric, analytic, kFd, 0.1));
  // Padded rows: no token, no logit, exactly zero gradient.
  for (size_t i = 40; i < analytic.size(); ++i) {
    ASSERT_EQ(analytic[i], 0.0f);
    ASSERT_EQ(numeric[i], 0.0);
  }
  std::vector<double> dwpe = finite_difference(
      f.emb.wpe().value, [&] { return f.loss(); }, 1e-2);
  EXPECT_TRUE(close(dwpe, f.emb.wpe().grad.to_vector(), kFd, 0.1));
}

TEST(LmHead, InputGradientMatchesFiniteDifferences) {
  LmFixture f;
  Tensor x = random_tensor({2, 4, 4}, 9);
  Ctx ctx;
  f.head.forward_loss(ctx, x, f.targets);
  Tensor dx = f.head.backward_loss(ctx, 2.0f);
  std::vector<double> numeric = finite_difference(
      x,
      [&] {
        Ctx c;
        return 2.0 * f.head.forward_loss(c, x, f.targets);
      },
      1e-2);
  EXPECT_TRUE(close(numeric, dx.to_vector(), kFd, 0.1));
}

TEST(LmHead, LossMatchesTheSeparateCalls) {
  LmFixture f;
  Tensor x = random_tensor({2, 4, 4}, 10);
  Ctx a;
  const float fused = f.head.forward_loss(a, x, f.targets);
  Tensor dx_fused = f.head.backward_loss(a);
  Tensor grad_fused = f.emb.wte().grad.clone();
  f.emb.zero_grad();
  Ctx b;
  Tensor logits = f.head.forward(b, x);
  EXPECT_EQ(logits.shape(), Shape({2, 4, 16}));
  Tensor lse = Tensor::empty({8});
  const float loss = vocab_parallel_cross_entropy(logits, f.targets, lse, {.vocab = 10});
  EXPECT_EQ(loss, fused);
  Tensor dlogits = Tensor::empty(logits.shape());
  vocab_parallel_cross_entropy_backward(logits, f.targets, lse, 1.0f, dlogits, {.vocab = 10});
  EXPECT_EQ(f.head.backward(b, dlogits).to_vector(), dx_fused.to_vector());
  EXPECT_EQ(f.emb.wte().grad.to_vector(), grad_fused.to_vector());
  // The padded columns' logits are x · 0 = 0 and their gradient is 0.
  std::vector<float> d = dlogits.to_vector();
  for (int64_t r = 0; r < 8; ++r) {
    for (int64_t c = 10; c < 16; ++c) ASSERT_EQ(d[static_cast<size_t>(r * 16 + c)], 0.0f);
  }
  EXPECT_THROW(f.head.backward_loss(b), Error);  // no forward_loss in this context
}

TEST(LmHead, Bf16ComputeIsCloseToF32) {
  EmbeddingConfig cfg = small_config();
  cfg.init_std = 0.02f;
  VocabParallelEmbedding emb32(ctx3(), cfg);
  VocabParallelEmbedding emb16(ctx3(nullptr, SequenceParallel::off, DType::bf16), cfg);
  LmHead h32(emb32), h16(emb16);
  LmFixture f;
  Ctx a, b;
  const float l32 = h32.forward_loss(a, emb32.forward(a, f.tokens), f.targets);
  Tensor x16 = emb16.forward(b, f.tokens);
  EXPECT_EQ(x16.dtype(), DType::bf16);
  const float l16 = h16.forward_loss(b, x16, f.targets);
  EXPECT_NEAR(l16, l32, 1.6e-2 * l32);
  emb32.backward(a, h32.backward_loss(a));
  emb16.backward(b, h16.backward_loss(b));
  EXPECT_TRUE(close(emb32.wte().grad, emb16.wte().grad, {5e-2, 1e-4}));
}

TEST(VocabCrossEntropy, MatchesAnFp64ReferenceAndIgnoresPadding) {
  const int64_t n = 5, vp = 8, vocab = 6;
  Tensor logits = random_tensor({n, vp}, 4, -3.0f, 3.0f);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = vocab; c < vp; ++c) logits.data<float>()[r * vp + c] = 40.0f;
  }
  Tensor targets = ids({n}, {0, 5, -100, 2, 3});
  double expected = 0;
  for (int64_t r = 0; r < n; ++r) {
    const int32_t t = targets.data<int32_t>()[r];
    if (t == -100) continue;
    double s = 0;
    for (int64_t c = 0; c < vocab; ++c) s += std::exp(double(logits.item(r * vp + c)));
    expected += std::log(s) - logits.item(r * vp + t);
  }
  expected /= 4;
  Tensor lse = Tensor::empty({n});
  const float loss = vocab_parallel_cross_entropy(logits, targets, lse, {.vocab = vocab});
  EXPECT_NEAR(loss, expected, 1e-5 * std::abs(expected));
  // d(loss)/d(logits) by finite differences, padding included (zero).
  Tensor d = Tensor::empty({n, vp});
  vocab_parallel_cross_entropy_backward(logits, targets, lse, 1.0f, d, {.vocab = vocab});
  std::vector<double> numeric = finite_difference(
      logits,
      [&] {
        Tensor l = Tensor::empty({n});
        return double(vocab_parallel_cross_entropy(logits, targets, l, {.vocab = vocab}));
      },
      1e-2);
  EXPECT_TRUE(close(numeric, d.to_vector(), kFd, 0.1));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = vocab; c < vp; ++c) ASSERT_EQ(d.item(r * vp + c), 0.0f);
  }
  // A padded id is not a target; shapes must agree; the logits must cover the vocabulary.
  EXPECT_THROW(vocab_parallel_cross_entropy(logits, ids({n}, {0, 6, 1, 1, 1}), lse, {.vocab = 6}),
               Error);
  EXPECT_THROW(vocab_parallel_cross_entropy(logits, ids({4}, {0, 1, 1, 1}), lse, {.vocab = 6}),
               Error);
  EXPECT_THROW(vocab_parallel_cross_entropy(logits, targets, lse, {.vocab = 9}), Error);
}

TEST(VocabCrossEntropy, AllIgnoredGivesZero) {
  Tensor logits = random_tensor({2, 3, 8}, 5);
  Tensor targets = ids({2, 3}, {-1, -1, -1, -1, -1, -1});
  Tensor lse = Tensor::empty({6});
  const CrossEntropyConfig ce{.vocab = 8, .ignore_index = -1};
  EXPECT_EQ(vocab_parallel_cross_entropy(logits, targets, lse, ce), 0.0f);
  vocab_parallel_cross_entropy_backward(logits, targets, lse, 1.0f, logits, ce);
  for (float v : logits.to_vector()) ASSERT_EQ(v, 0.0f);
}

// Collectives on the TP group per call, with their sizes (nccl-tests bytes:
// the full output of all_gather, the full input of reduce_scatter).
struct Calls {
  int64_t all_gather = 0, reduce_scatter = 0, all_reduce = 0;
  int64_t bytes = 0;  // all kinds together
};

void expect_calls(comm::ProcessGroup& g, const Calls& e, const char* what) {
  SCOPED_TRACE(what);
  const comm::CommStats s = g.stats();
  EXPECT_EQ(s.count(OpKind::all_gather), e.all_gather);
  EXPECT_EQ(s.count(OpKind::reduce_scatter), e.reduce_scatter);
  EXPECT_EQ(s.count(OpKind::all_reduce), e.all_reduce);
  EXPECT_EQ(s.total_calls(), e.all_gather + e.reduce_scatter + e.all_reduce);
  EXPECT_EQ(s.total_bytes(), e.bytes);
  g.reset_stats();
}

TEST(VocabCollectives, PerForwardAndBackward) {
  const int64_t b = 4, t = 8, c = 4, n = b * t, act = n * c * 4, row = n * 4;
  for (int tp : {2, 4}) {
    for (SequenceParallel sp :
         {SequenceParallel::off, SequenceParallel::seq, SequenceParallel::batch}) {
      SCOPED_TRACE(format("tp {} sp {}", tp, sequence_parallel_name(sp)));
      const bool on = sp != SequenceParallel::off;
      comm::run_local(tp, [&](comm::ProcessGroup& world) {
        comm::Grid grid(world, "tp-dp", {{"tp", tp}});
        auto g = grid.group_ptr("tp");
        EmbeddingConfig cfg = small_config(10, 8);
        cfg.max_seq = t;
        VocabParallelEmbedding emb(ctx3(g, sp), cfg);
        LmHead head(emb);
        Tensor tokens = Tensor::from_i32({b, t}, std::vector<int32_t>(n, 3));
        // In the residual stream's token order: (T, B) under seq SP.
        Tensor targets = Tensor::from_i32(sp == SequenceParallel::seq ? Shape{t, b} : Shape{b, t},
                                          std::vector<int32_t>(n, 7));
        g->reset_stats();
        Ctx ctx;
        Tensor x = emb.forward(ctx, tokens);
        expect_calls(
            *g,
            on ? Calls{.reduce_scatter = 1, .bytes = act} : Calls{.all_reduce = 1, .bytes = act},
            "embedding forward");
        Tensor logits = head.forward(ctx, x);
        expect_calls(*g, on ? Calls{.all_gather = 1, .bytes = act} : Calls{}, "lm head forward");
        Tensor lse = Tensor::empty({n});
        const CrossEntropyConfig ce{.vocab = 10, .tp = g};
        vocab_parallel_cross_entropy(logits, targets, lse, ce);
        expect_calls(*g, {.all_reduce = 2, .bytes = 3 * row}, "cross-entropy forward");
        vocab_parallel_cross_entropy_backward(logits, targets, lse, 1.0f, logits, ce);
        expect_calls(*g, {}, "cross-entropy backward");
        Tensor dx = head.backward(ctx, logits);
        // Under SP the head saved only its input shard: backward re-gathers it
        // (Megatron) besides reduce-scattering the input gradient.
        expect_calls(*g,
                     on ? Calls{.all_gather = 1, .reduce_scatter = 1, .bytes = 2 * act}
                        : Calls{.all_reduce = 1, .bytes = act},
                     "lm head backward");
        emb.backward(ctx, dx);
        expect_calls(*g, on ? Calls{.all_gather = 1, .bytes = act} : Calls{}, "embedding backward");
        // The fused loss: the head's collectives plus the cross-entropy's.
        head.forward_loss(ctx, x, targets);
        expect_calls(*g,
                     on ? Calls{.all_gather = 1, .all_reduce = 2, .bytes = act + 3 * row}
                        : Calls{.all_reduce = 2, .bytes = 3 * row},
                     "forward_loss");
        head.backward_loss(ctx);
        expect_calls(*g,
                     on ? Calls{.all_gather = 1, .reduce_scatter = 1, .bytes = 2 * act}
                        : Calls{.all_reduce = 1, .bytes = act},
                     "backward_loss");
      });
    }
  }
}

}  // namespace
}  // namespace weft::nn
