// TP equivalence of the vocab-parallel embedding, the tied LM head and the
// vocab-parallel cross-entropy, for vocabularies that TP does not divide.
#include <gtest/gtest.h>

#include <random>

#include "contexts.h"
#include "testing.h"
#include "tp_cases.h"
#include "tp_harness.h"
#include "weft/comm/grid.h"
#include "weft/nn/cross_entropy.h"
#include "weft/nn/embedding.h"
#include "weft/parallel/mappings.h"

namespace weft::nn::testing {

namespace {

constexpr int64_t B = 4, T = 8, C = 16, MAX_T = 12;
constexpr int32_t kIgnore = -100;

struct Vocab {
  int64_t size;
  int64_t pad;
};

// Ids in [0, vocab), with 0 and vocab - 1 always present; every `ignore_every`
// th one is kIgnore (0: none).
Tensor random_ids(int64_t vocab, uint32_t seed, int ignore_every = 0) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> ids(static_cast<size_t>(B * T));
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = dist(gen);
    if (ignore_every > 0 && i % static_cast<size_t>(ignore_every) == 3) ids[i] = kIgnore;
  }
  ids[0] = 0;
  ids[1] = static_cast<int32_t>(vocab - 1);
  return Tensor::from_i32({B, T}, ids);
}

// Built with seed 5.
EmbeddingConfig embedding_config(Vocab v) {
  return {.vocab = v.size, .max_seq = MAX_T, .channels = C, .vocab_pad = v.pad};
}

// This rank's columns of full logits (..., Vp) or rows of a (Vp, C) table.
Tensor vocab_slice(const Tensor& full, int dim, comm::ProcessGroup& tp) {
  return parallel::slice_along(exec_of(full), full, dim, tp.size(), tp.rank());
}

// Every element of rows >= vocab of this rank's slice of wte (value and
// gradient) is exactly zero.
void expect_padding_zero(VocabParallelEmbedding& emb) {
  const int64_t start = emb.vocab_start(), rows = emb.local_vocab();
  std::vector<float> value = emb.wte().value.to_vector(), grad = emb.wte().grad.to_vector();
  for (int64_t r = 0; r < rows; ++r) {
    if (start + r < emb.config().vocab) continue;
    for (int64_t c = 0; c < C; ++c) {
      const size_t i = static_cast<size_t>(r * C + c);
      ASSERT_EQ(value[i], 0.0f) << "padded row " << start + r;
      ASSERT_EQ(grad[i], 0.0f) << "padded row " << start + r;
    }
  }
}

// The loss is bitwise the same on every rank of the group.
void expect_same_on_group(float loss, comm::ProcessGroup& tp) {
  Tensor t = Tensor::from({2}, std::vector<float>{loss, -loss});
  tp.all_reduce(t, comm::ReduceOp::max).wait();
  EXPECT_EQ(t.item(0), loss);
  EXPECT_EQ(t.item(1), -loss);
}

void check_embedding(comm::ProcessGroup& world, int tp_size, Vocab v, SequenceParallel sp,
                     int64_t pos_offset) {
  comm::Grid grid(world, "tp-dp", {{"tp", tp_size}});
  auto tp = grid.group_ptr("tp");
  Tensor tokens = random_ids(v.size, 11);
  Tensor dy = random_tensor({B, T, C}, 12);

  VocabParallelEmbedding ref(host_ctx_of(nullptr, SequenceParallel::off, DType::f32, 5),
                             embedding_config(v));
  Ctx rctx;
  Tensor y_ref = ref.forward(rctx, tokens, pos_offset);
  ref.backward(rctx, dy);

  VocabParallelEmbedding emb(ctx_of(tp, sp, DType::f32, 5), embedding_config(v));
  EXPECT_EQ(emb.padded_vocab(), ref.padded_vocab());
  EXPECT_EQ(emb.vocab_start(), tp->rank() * emb.padded_vocab() / tp->size());
  EXPECT_EQ(emb.wte().spec.valid_rows, v.size);
  Ctx ctx;
  Tensor y = emb.forward(ctx, on_test_device(tokens), pos_offset);
  EXPECT_TRUE(close(local_tokens(y_ref, sp, *tp), y, kF32, 1.0));
  EXPECT_FALSE(emb.backward(ctx, local_tokens(dy, sp, *tp)).defined());
  expect_same_parameters(emb, ref);
  expect_padding_zero(emb);
}

// Embedding -> tied LM head -> vocab-parallel cross-entropy, and back.
// fused: the TP run uses LmHead::forward_loss / backward_loss instead of the
// separate calls.
void check_lm_loss(comm::ProcessGroup& world, int tp_size, Vocab v, SequenceParallel sp,
                   bool fused) {
  comm::Grid grid(world, "tp-dp", {{"tp", tp_size}});
  auto tp = grid.group_ptr("tp");
  Tensor tokens = random_ids(v.size, 21);
  Tensor targets = random_ids(v.size, 22, 5).reshape({B * T});

  VocabParallelEmbedding ref_emb(host_ctx_of(nullptr, SequenceParallel::off, DType::f32, 5),
                                 embedding_config(v));
  LmHead ref_head(ref_emb);
  const CrossEntropyConfig ref_ce{.vocab = v.size};
  Ctx rctx;
  Tensor x_ref = ref_emb.forward(rctx, tokens);
  Tensor logits_ref = ref_head.forward(rctx, x_ref);
  Tensor lse_ref = Tensor::empty({B * T});
  const float loss_ref =
      vocab_parallel_cross_entropy(logits_ref, targets.reshape({B, T}), lse_ref, ref_ce);
  Tensor dlogits_ref = Tensor::empty(logits_ref.shape());
  vocab_parallel_cross_entropy_backward(logits_ref, targets.reshape({B, T}), lse_ref, 1.0f,
                                        dlogits_ref, ref_ce);
  Tensor dx_ref = ref_head.backward(rctx, dlogits_ref);
  ref_emb.backward(rctx, dx_ref);

  VocabParallelEmbedding emb(ctx_of(tp, sp, DType::f32, 5), embedding_config(v));
  LmHead head(emb);
  // Logits and targets are in the residual stream's token order.
  const Tensor my_targets = in_layout(targets.reshape({B, T}), sp);
  EXPECT_TRUE(head.parameters().empty());  // tied: wte is listed by the embedding only
  Ctx ctx;
  Tensor x = emb.forward(ctx, on_test_device(tokens));
  float loss = 0;
  Tensor dx;
  if (fused) {
    loss = head.forward_loss(ctx, x, my_targets, kIgnore);
    dx = head.backward_loss(ctx);
  } else {
    const CrossEntropyConfig ce{
        .vocab = v.size, .tp = tp, .ignore_index = kIgnore, .exec = test_exec()};
    Tensor logits = head.forward(ctx, x);
    EXPECT_TRUE(close(vocab_slice(in_layout(logits_ref, sp), -1, *tp), logits, kF32, 1.0));
    Tensor lse = test_exec().empty({B * T});
    loss = vocab_parallel_cross_entropy(logits, my_targets, lse, ce);
    Tensor dlogits = test_exec().empty(logits.shape());
    vocab_parallel_cross_entropy_backward(logits, my_targets, lse, 1.0f, dlogits, ce);
    EXPECT_TRUE(close(vocab_slice(in_layout(dlogits_ref, sp), -1, *tp), dlogits, kF32, 1.0));
    dx = head.backward(ctx, dlogits);
  }
  EXPECT_NEAR(loss, loss_ref, 1e-5 * std::abs(loss_ref));
  expect_same_on_group(loss, *tp);
  EXPECT_TRUE(close(local_tokens(dx_ref, sp, *tp), dx, kF32, 1.0));
  emb.backward(ctx, dx);
  expect_same_parameters(emb, ref_emb);
  expect_padding_zero(emb);
}

// The cross-entropy alone on logits whose padded columns hold large values:
// they must not change the loss, and their gradient is exactly zero.
void check_cross_entropy(comm::ProcessGroup& world, int tp_size, Vocab v, DType dtype) {
  comm::Grid grid(world, "tp-dp", {{"tp", tp_size}});
  auto tp = grid.group_ptr("tp");
  const int64_t vp = padded_vocab_size(v.size, v.pad), n = B * T;
  Tensor full = random_tensor({n, vp}, 31, -4.0f, 4.0f);
  {
    float* p = full.data<float>();
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = v.size; c < vp; ++c) p[r * vp + c] = 50.0f;
    }
  }
  full = full.to(dtype);
  Tensor targets = random_ids(v.size, 32, 4).reshape({n});
  Tensor lse_ref = Tensor::empty({n});
  const float loss_ref = vocab_parallel_cross_entropy(full, targets, lse_ref, {.vocab = v.size});
  Tensor d_ref = Tensor::empty(full.shape(), dtype);
  vocab_parallel_cross_entropy_backward(full, targets, lse_ref, 0.5f, d_ref, {.vocab = v.size});

  const CrossEntropyConfig ce{.vocab = v.size, .tp = tp, .exec = test_exec()};
  Tensor logits = on_test_device(vocab_slice(full, -1, *tp));
  const Tensor my_targets = on_test_device(targets);
  Tensor lse = test_exec().empty({n});
  const float loss = vocab_parallel_cross_entropy(logits, my_targets, lse, ce);
  EXPECT_NEAR(loss, loss_ref, 1e-5 * std::abs(loss_ref));
  expect_same_on_group(loss, *tp);
  EXPECT_TRUE(close(lse_ref, lse, kF32, 1.0));
  // In place: the gradient overwrites the logits.
  vocab_parallel_cross_entropy_backward(logits, my_targets, lse, 0.5f, logits, ce);
  EXPECT_TRUE(close(vocab_slice(d_ref, -1, *tp), logits, dtype == DType::f32 ? kF32 : kBF16, 1.0));
  const int64_t cols = vp / tp->size(), start = tp->rank() * cols;
  std::vector<float> d = logits.to_vector();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = std::max<int64_t>(v.size - start, 0); c < cols; ++c) {
      ASSERT_EQ(d[static_cast<size_t>(r * cols + c)], 0.0f) << "row " << r << " id " << start + c;
    }
  }
}

std::string vocab_tag(Vocab v) {
  return "_v" + std::to_string(v.size) + "_pad" + std::to_string(v.pad);
}

}  // namespace

std::vector<TpCase> vocab_cases() {
  std::vector<TpCase> cases;
  const std::pair<const char*, SequenceParallel> sps[] = {{"", SequenceParallel::off},
                                                          {"_sp_seq", SequenceParallel::seq},
                                                          {"_sp_batch", SequenceParallel::batch}};
  // 50 -> 56 rows (TP 4: the last rank holds 6 real rows and 8 padded ones);
  // 257 -> 384 rows (TP 4: rank 2 holds one real row, rank 3 only padding).
  const Vocab vocabs[] = {{50, 8}, {257, 128}};
  for (Vocab v : vocabs) {
    for (const auto& [sp_name, sp] : sps) {
      const std::string tag = vocab_tag(v) + sp_name;
      cases.push_back({"vocab_embedding" + tag,
                       [v, sp](comm::ProcessGroup& w, int t) { check_embedding(w, t, v, sp, 0); }});
      cases.push_back({"vocab_lm_loss" + tag, [v, sp](comm::ProcessGroup& w, int t) {
                         check_lm_loss(w, t, v, sp, false);
                       }});
    }
    cases.push_back({"vocab_cross_entropy" + vocab_tag(v), [v](comm::ProcessGroup& w, int t) {
                       check_cross_entropy(w, t, v, DType::f32);
                     }});
  }
  for (const auto& [sp_name, sp] : sps) {
    cases.push_back(
        {std::string("vocab_embedding_pos_offset") + sp_name, [sp](comm::ProcessGroup& w, int t) {
           check_embedding(w, t, {50, 8}, sp, 3);
         }});
    cases.push_back(
        {std::string("vocab_lm_loss_fused") + sp_name, [sp](comm::ProcessGroup& w, int t) {
           check_lm_loss(w, t, {50, 8}, sp, true);
         }});
  }
  cases.push_back({"vocab_cross_entropy_bf16", [](comm::ProcessGroup& w, int t) {
                     check_cross_entropy(w, t, {50, 8}, DType::bf16);
                   }});
  return cases;
}

}  // namespace weft::nn::testing
