#include "weft/kernels/embedding.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testing.h"
#include "weft/core/threads.h"

namespace weft::kernels {
namespace {

// The host context: the calling thread's CPU threads.
const ExecContext& ec = ExecContext::host();

using weft::testing::close;
using weft::testing::finite_difference;
using weft::testing::kBF16;
using weft::testing::kF32;
using weft::testing::random_tensor;
using weft::testing::weighted_sum;

Tensor token_tensor(int64_t batch, int64_t seq, const std::vector<int32_t>& t) {
  return Tensor::from_i32({batch, seq}, t);
}

// fp64 reference of wte[tokens] + wpe[pos_offset + t] (wpe optional).
std::vector<double> reference_forward(const std::vector<int32_t>& tokens, int64_t seq,
                                      const Tensor& wte, const Tensor* wpe, int64_t pos_offset) {
  const int64_t channels = wte.size(1);
  std::vector<float> e = wte.to_vector();
  std::vector<float> p = wpe ? wpe->to_vector() : std::vector<float>{};
  std::vector<double> out;
  for (size_t n = 0; n < tokens.size(); ++n) {
    const int64_t t = static_cast<int64_t>(n) % seq;
    for (int64_t c = 0; c < channels; ++c) {
      double v = e[static_cast<size_t>(tokens[n] * channels + c)];
      if (wpe) v += p[static_cast<size_t>((pos_offset + t) * channels + c)];
      out.push_back(v);
    }
  }
  return out;
}

TEST(Embedding, ForwardCopiesTableRows) {
  Tensor wte = random_tensor({10, 7}, 1);
  std::vector<int32_t> t = {3, 3, 0, 9, 5, 1};
  Tensor out = Tensor::empty({2, 3, 7});
  embedding_forward(ec, token_tensor(2, 3, t), wte, out);
  std::vector<double> expected = reference_forward(t, 3, wte, nullptr, 0);
  std::vector<float> got = out.to_vector();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], expected[i]);
}

TEST(Embedding, Bf16OutputRoundsTheTable) {
  Tensor wte = random_tensor({10, 7}, 2);
  std::vector<int32_t> t = {1, 8, 4, 4};
  Tensor out = Tensor::empty({1, 4, 7}, DType::bf16);
  embedding_forward(ec, token_tensor(1, 4, t), wte, out);
  std::vector<double> expected = reference_forward(t, 4, wte, nullptr, 0);
  std::vector<float> got = out.to_vector();
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i], round_to_bf16(static_cast<float>(expected[i])));
  }
}

TEST(Embedding, PositionForwardAddsRowsFromTheOffset) {
  Tensor wte = random_tensor({12, 5}, 3);
  Tensor wpe = random_tensor({8, 5}, 4);
  std::vector<int32_t> t = {0, 11, 2, 7, 7, 7};
  for (DType dtype : {DType::f32, DType::bf16}) {
    Tensor out = Tensor::empty({2, 3, 5}, dtype);
    embedding_forward(ec, token_tensor(2, 3, t), wte, out);
    position_embedding_forward(ec, wpe, out, 4);
    EXPECT_TRUE(close(reference_forward(t, 3, wte, &wpe, 4), out.to_vector(),
                      dtype == DType::f32 ? kF32 : kBF16));
  }
}

TEST(Embedding, BackwardMatchesFp64Reference) {
  const int64_t batch = 3, seq = 4, vocab = 6, channels = 21, max_seq = 9, offset = 2;
  std::vector<int32_t> t = {5, 0, 5, 5, 1, 2, 3, 0, 5, 5, 4, 1};
  Tensor dout = random_tensor({batch, seq, channels}, 5);
  // Accumulates onto what the gradients already hold.
  Tensor dwte = random_tensor({vocab, channels}, 6);
  Tensor dwpe = random_tensor({max_seq, channels}, 7);
  std::vector<float> d = dout.to_vector(), w0 = dwte.to_vector(), p0 = dwpe.to_vector();
  std::vector<double> ewte(w0.begin(), w0.end()), ewpe(p0.begin(), p0.end());
  for (int64_t n = 0; n < batch * seq; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      const double g = d[static_cast<size_t>(n * channels + c)];
      ewte[static_cast<size_t>(t[static_cast<size_t>(n)] * channels + c)] += g;
      ewpe[static_cast<size_t>((offset + n % seq) * channels + c)] += g;
    }
  }
  embedding_backward(ec, dout, token_tensor(batch, seq, t), dwte);
  position_embedding_backward(ec, dout, dwpe, offset);
  EXPECT_TRUE(close(ewte, dwte.to_vector(), kF32));
  EXPECT_TRUE(close(ewpe, dwpe.to_vector(), kF32));
}

// (A, B, C) -> (B, A, C) element by element (bf16 values survive exactly).
Tensor swap01(const Tensor& t) {
  const int64_t A = t.size(0), B = t.size(1), C = t.size(2);
  std::vector<float> v = t.to_vector(), s(v.size());
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c) {
        s[static_cast<size_t>((b * A + a) * C + c)] = v[static_cast<size_t>((a * B + b) * C + c)];
      }
  return Tensor::from({B, A, C}, s, t.dtype());
}

TEST(Embedding, PositionsOfSequenceMajorRows) {
  // (T, B, C): row i holds position i / B + pos_offset; the results are the
  // batch-major ones, transposed, bit for bit.
  const int64_t batch = 3, seq = 5, channels = 6, offset = 2;
  Tensor wpe = random_tensor({9, channels}, 40);
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor x = random_tensor({batch, seq, channels}, 41, -1.0f, 1.0f, dtype);
    Tensor batch_major = x.clone(), sequence_major = swap01(x);
    position_embedding_forward(ec, wpe, batch_major, offset);
    position_embedding_forward(ec, wpe, sequence_major, offset, true);
    EXPECT_EQ(swap01(sequence_major).to_vector(), batch_major.to_vector());

    Tensor dwpe_batch = random_tensor({9, channels}, 42), dwpe_seq = dwpe_batch.clone();
    position_embedding_backward(ec, x, dwpe_batch, offset);
    position_embedding_backward(ec, swap01(x), dwpe_seq, offset, true);
    EXPECT_EQ(dwpe_seq.to_vector(), dwpe_batch.to_vector());
  }
  // The positions checked against the table are the sequence's, dimension 0.
  Tensor long_seq = Tensor::zeros({8, 2, channels});
  EXPECT_THROW(position_embedding_forward(ec, wpe, long_seq, 2, true), weft::Error);
  EXPECT_NO_THROW(position_embedding_forward(ec, wpe, long_seq, 1, true));
}

TEST(Embedding, BackwardMatchesFiniteDifferences) {
  const int64_t batch = 2, seq = 3, vocab = 5, channels = 4, max_seq = 4;
  Tensor tokens = token_tensor(batch, seq, {4, 1, 1, 0, 4, 4});
  Tensor wte = random_tensor({vocab, channels}, 8);
  Tensor wpe = random_tensor({max_seq, channels}, 9);
  Tensor w = random_tensor({batch, seq, channels}, 10);
  Tensor out = Tensor::empty({batch, seq, channels});
  auto loss = [&] {
    embedding_forward(ec, tokens, wte, out);
    position_embedding_forward(ec, wpe, out, 1);
    return weighted_sum(out, w);
  };
  std::vector<double> numeric_wte = finite_difference(wte, loss);
  std::vector<double> numeric_wpe = finite_difference(wpe, loss);
  Tensor dwte = Tensor::zeros({vocab, channels});
  Tensor dwpe = Tensor::zeros({max_seq, channels});
  embedding_backward(ec, w, tokens, dwte);
  position_embedding_backward(ec, w, dwpe, 1);
  // The loss is linear in the tables: only f32 rounding of the sums remains.
  EXPECT_TRUE(close(numeric_wte, dwte.to_vector(), {1e-3, 1e-4}));
  EXPECT_TRUE(close(numeric_wpe, dwpe.to_vector(), {1e-3, 1e-4}));
}

TEST(Embedding, Bf16GradientMatchesReference) {
  std::vector<int32_t> t = {2, 2, 0, 1};
  Tensor dout = random_tensor({2, 2, 9}, 11, -1.0f, 1.0f, DType::bf16);
  Tensor dwte = Tensor::zeros({3, 9});
  embedding_backward(ec, dout, token_tensor(2, 2, t), dwte);
  std::vector<float> d = dout.to_vector();
  std::vector<double> expected(27, 0.0);
  for (size_t n = 0; n < t.size(); ++n) {
    for (size_t c = 0; c < 9; ++c) expected[static_cast<size_t>(t[n]) * 9 + c] += d[n * 9 + c];
  }
  EXPECT_TRUE(close(expected, dwte.to_vector(), kF32));
}

// Vocab-parallel: each rank holds a slice of wte; the per-rank outputs sum to
// the whole lookup and each rank's dwte is its rows of the whole gradient.
TEST(Embedding, VocabSlicesSumToWhole) {
  const int64_t batch = 2, seq = 5, vocab = 12, channels = 6, ranks = 3, local = vocab / ranks;
  std::vector<int32_t> t = {0, 3, 4, 11, 8, 8, 7, 1, 4, 11};
  Tensor tokens = token_tensor(batch, seq, t);
  Tensor wte = random_tensor({vocab, channels}, 12);
  Tensor dout = random_tensor({batch, seq, channels}, 13);
  Tensor whole = Tensor::empty({batch, seq, channels});
  embedding_forward(ec, tokens, wte, whole);
  Tensor whole_grad = Tensor::zeros({vocab, channels});
  embedding_backward(ec, dout, tokens, whole_grad);

  std::vector<float> sum(static_cast<size_t>(batch * seq * channels), 0.0f);
  for (int64_t r = 0; r < ranks; ++r) {
    const EmbeddingOptions opt{.vocab_start = r * local, .valid_vocab = vocab};
    Tensor shard = wte.narrow(r * local, local);
    Tensor out = Tensor::full({batch, seq, channels}, 7.0f);
    embedding_forward(ec, tokens, shard, out, opt);
    std::vector<float> o = out.to_vector();
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += o[i];

    Tensor grad = Tensor::zeros({local, channels});
    embedding_backward(ec, dout, tokens, grad, opt);
    EXPECT_EQ(grad.to_vector(), whole_grad.narrow(r * local, local).to_vector());
  }
  EXPECT_EQ(sum, whole.to_vector());
}

TEST(Embedding, BackwardIsTheSameForAnyThreadCount) {
  const int64_t batch = 4, seq = 64, vocab = 50, channels = 100, max_seq = 70;
  std::vector<int32_t> t(static_cast<size_t>(batch * seq));
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>((i * i + 3 * i) % vocab);
  Tensor tokens = token_tensor(batch, seq, t);
  Tensor dout = random_tensor({batch, seq, channels}, 14);
  auto run = [&](int threads) {
    set_num_threads(threads);
    Tensor dwte = random_tensor({vocab, channels}, 15);
    Tensor dwpe = random_tensor({max_seq, channels}, 16);
    embedding_backward(ec, dout, tokens, dwte);
    position_embedding_backward(ec, dout, dwpe, 3);
    set_num_threads(0);
    std::vector<float> all = dwte.to_vector(), p = dwpe.to_vector();
    all.insert(all.end(), p.begin(), p.end());
    return all;
  };
  std::vector<float> one = run(1);
  EXPECT_EQ(one, run(2));
  EXPECT_EQ(one, run(3));
}

TEST(Embedding, BadTokenIdsNamePositionAndId) {
  Tensor wte = random_tensor({10, 4}, 17);
  Tensor out = Tensor::empty({2, 2, 4});
  for (int32_t bad : {10, -1}) {
    try {
      embedding_forward(ec, token_tensor(2, 2, {0, 1, 2, bad}), wte, out);
      FAIL() << "token " << bad << " was accepted";
    } catch (const weft::Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("token id " + std::to_string(bad)), std::string::npos) << msg;
      EXPECT_NE(msg.find("batch 1, position 1"), std::string::npos) << msg;
    }
  }
  Tensor dwte = Tensor::zeros({10, 4});
  EXPECT_THROW(embedding_backward(ec, out, token_tensor(2, 2, {0, 1, 2, 12}), dwte), weft::Error);

  // In a vocab slice, ids of other ranks are legal; ids past the vocabulary are not.
  const EmbeddingOptions slice{.vocab_start = 10, .valid_vocab = 30};
  EXPECT_NO_THROW(embedding_forward(ec, token_tensor(2, 2, {0, 29, 15, 20}), wte, out, slice));
  EXPECT_THROW(embedding_forward(ec, token_tensor(2, 2, {0, 30, 15, 20}), wte, out, slice),
               weft::Error);
}

// A bf16 table gives the rows of the f32 table rounded to bf16, in either
// output dtype: the same values as an f32 lookup stored in bf16.
TEST(Embedding, ReadsABf16Table) {
  Tensor wte = random_tensor({10, 4}, 18);
  Tensor tokens = token_tensor(2, 2, {0, 9, 2, 3});
  for (DType out_dtype : {DType::f32, DType::bf16}) {
    Tensor from_f32 = Tensor::empty({2, 2, 4}, DType::bf16);
    Tensor from_bf16 = Tensor::empty({2, 2, 4}, out_dtype);
    embedding_forward(ec, tokens, wte, from_f32);
    embedding_forward(ec, tokens, wte.to(DType::bf16), from_bf16);
    EXPECT_EQ(from_bf16.to_vector(), from_f32.to_vector());
  }
}

TEST(Embedding, RejectsBadShapesAndTypes) {
  Tensor wte = random_tensor({10, 4}, 18);
  Tensor wpe = random_tensor({3, 4}, 19);
  Tensor tokens = token_tensor(2, 2, {0, 1, 2, 3});
  Tensor out = Tensor::empty({2, 2, 4});
  Tensor wrong_channels = Tensor::empty({2, 2, 5});
  Tensor wrong_seq = Tensor::empty({2, 3, 4});
  Tensor bf16_table = wte.to(DType::bf16);
  EXPECT_THROW(embedding_forward(ec, tokens, wte, wrong_channels), weft::Error);
  EXPECT_THROW(embedding_forward(ec, tokens, wte, wrong_seq), weft::Error);
  EXPECT_THROW(embedding_forward(ec, Tensor::zeros({2, 2}), wte, out), weft::Error);
  // A bf16 table is read (the weight a bf16 recipe hands out), never accumulated into.
  EXPECT_THROW(embedding_backward(ec, out, tokens, bf16_table), weft::Error);
  EXPECT_THROW(embedding_forward(ec, tokens, Tensor::zeros({10, 4}, DType::i32), out), weft::Error);
  // Positions past the table (a sequence longer than the context).
  EXPECT_THROW(position_embedding_forward(ec, wpe, out, 2), weft::Error);
  EXPECT_THROW(position_embedding_forward(ec, wpe, out, -1), weft::Error);
  EXPECT_NO_THROW(position_embedding_forward(ec, wpe, out, 1));
  Tensor dwpe = Tensor::zeros({3, 4});
  EXPECT_THROW(position_embedding_backward(ec, wrong_channels, dwpe, 0), weft::Error);
  EXPECT_THROW(position_embedding_backward(ec, out, dwpe, 2), weft::Error);
}

}  // namespace
}  // namespace weft::kernels
