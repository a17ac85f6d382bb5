// The CUDA embedding kernels against the CPU ones: lookups are copies and
// the gradients add in the CPU's order, so every result is bitwise the CPU's.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "bitwise.h"
#include "cuda_testing.h"
#include "testing.h"
#include "weft/core/error.h"
#include "weft/kernels/embedding.h"

namespace weft::kernels {
namespace {

using weft::testing::bitwise_equal;
using weft::testing::gpu;
using weft::testing::random_tensor;

const ExecContext& cpu_ec = ExecContext::host();

// Token ids in [0, vocab) with many repeats (a small hot set), as text has.
Tensor random_tokens(int64_t batch, int64_t seq, int32_t vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> any(0, vocab - 1), hot(0, 15);
  std::vector<int32_t> t(static_cast<size_t>(batch * seq));
  for (size_t i = 0; i < t.size(); ++i) t[i] = i % 3 == 0 ? hot(gen) : any(gen);
  return Tensor::from_i32({batch, seq}, t);
}

struct Case {
  int64_t batch, seq, vocab, channels;
  DType act;
};
const std::vector<Case> kCases = {{3, 37, 1001, 771, DType::f32},
                                  {3, 37, 1001, 771, DType::bf16},
                                  {4, 1024, 50304, 768, DType::f32},
                                  {4, 1024, 50304, 768, DType::bf16}};

TEST(CudaEmbedding, ForwardAndBackwardMatchCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  for (const Case& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c.batch << "x" << c.seq << " vocab " << c.vocab << " C "
                                      << c.channels << " " << dtype_name(c.act));
    const Tensor tokens = random_tokens(c.batch, c.seq, static_cast<int32_t>(c.vocab), 1);
    const Tensor wte = random_tensor({c.vocab, c.channels}, 2);
    const Shape act{c.batch, c.seq, c.channels};
    Tensor out = Tensor::empty(act, c.act), gout = gpu(Tensor::zeros(act, c.act));
    const Tensor gtokens = gpu(tokens);
    embedding_forward(cpu_ec, tokens, wte, out);
    embedding_forward(gec, gtokens, gpu(wte), gout);
    EXPECT_TRUE(bitwise_equal(out, gout));

    const Tensor dout = random_tensor(act, 3, -1, 1, c.act);
    Tensor dwte = Tensor::zeros({c.vocab, c.channels});
    Tensor gdwte = gpu(dwte);
    const Tensor gdout = gpu(dout);
    for (int i = 0; i < 2; ++i) {
      embedding_backward(cpu_ec, dout, tokens, dwte);
      embedding_backward(gec, gdout, gtokens, gdwte);
    }
    EXPECT_TRUE(bitwise_equal(dwte, gdwte));
  }
}

TEST(CudaEmbedding, VocabSliceMatchesCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  // This rank holds rows [1000, 4000) of a 50304-token vocabulary, and a
  // bf16 table for the lookup.
  EmbeddingOptions opt;
  opt.vocab_start = 1000;
  opt.valid_vocab = 50304;
  const int64_t rows = 3000, channels = 771;
  const Tensor tokens = random_tokens(2, 301, 5000, 4);
  const Tensor wte = random_tensor({rows, channels}, 5, -1, 1, DType::bf16);
  const Shape act{2, 301, channels};
  Tensor out = Tensor::empty(act), gout = gpu(Tensor::full(act, 7.0f));
  const Tensor gtokens = gpu(tokens);
  embedding_forward(cpu_ec, tokens, wte, out, opt);
  embedding_forward(gec, gtokens, gpu(wte), gout, opt);
  EXPECT_TRUE(bitwise_equal(out, gout));

  const Tensor dout = random_tensor(act, 6);
  Tensor dwte = random_tensor({rows, channels}, 7);
  Tensor gdwte = gpu(dwte);
  embedding_backward(cpu_ec, dout, tokens, dwte, opt);
  embedding_backward(gec, gpu(dout), gtokens, gdwte, opt);
  EXPECT_TRUE(bitwise_equal(dwte, gdwte));
}

TEST(CudaEmbedding, InvalidTokenThrowsNamingPositionAndId) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  std::vector<int32_t> ids(2 * 5, 1);
  ids[7] = 123;  // batch 1, position 2
  const Tensor tokens = gpu(Tensor::from_i32({2, 5}, ids));
  const Tensor wte = gpu(random_tensor({100, 8}, 8));
  Tensor out = gpu(Tensor::zeros({2, 5, 8})), dwte = gpu(Tensor::zeros({100, 8}));
  for (const bool backward : {false, true}) {
    try {
      if (backward) {
        embedding_backward(gec, out, tokens, dwte);
      } else {
        embedding_forward(gec, tokens, wte, out);
      }
      ADD_FAILURE() << "token id 123 of a 100-token vocabulary was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("token id 123 at (batch 1, position 2)"),
                std::string::npos)
          << e.what();
    }
  }
  ids[7] = -1;
  EXPECT_THROW(embedding_forward(gec, gpu(Tensor::from_i32({2, 5}, ids)), wte, out), Error);
}

TEST(CudaEmbedding, PositionEmbeddingMatchesCpu) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  struct PosCase {
    int64_t a, b, max_t, channels, offset;
    bool sequence_major;
    DType act;
  };
  // (a, b) is (B, T), or (T, B) with sequence_major.
  const std::vector<PosCase> cases = {{3, 37, 50, 771, 5, false, DType::f32},
                                      {37, 3, 50, 771, 13, true, DType::bf16},
                                      {4, 1024, 1024, 768, 0, false, DType::bf16},
                                      {1024, 4, 1024, 768, 0, true, DType::f32}};
  for (const PosCase& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << c.a << "x" << c.b << " offset " << c.offset
                 << (c.sequence_major ? " sequence-major " : " ") << dtype_name(c.act));
    const Tensor wpe = random_tensor({c.max_t, c.channels}, 9);
    const Shape act{c.a, c.b, c.channels};
    Tensor out = random_tensor(act, 10, -1, 1, c.act);
    Tensor gout = gpu(out);
    position_embedding_forward(cpu_ec, wpe, out, c.offset, c.sequence_major);
    position_embedding_forward(gec, gpu(wpe), gout, c.offset, c.sequence_major);
    EXPECT_TRUE(bitwise_equal(out, gout));

    const Tensor dout = random_tensor(act, 11, -1, 1, c.act);
    Tensor dwpe = random_tensor({c.max_t, c.channels}, 12);
    Tensor gdwpe = gpu(dwpe);
    position_embedding_backward(cpu_ec, dout, dwpe, c.offset, c.sequence_major);
    position_embedding_backward(gec, gpu(dout), gdwpe, c.offset, c.sequence_major);
    EXPECT_TRUE(bitwise_equal(dwpe, gdwpe));
  }
}

// Token ids checked by the caller: no read-back, the rows grouped by token
// on the device (a radix sort) and still added in the CPU's order, bit for
// bit, in a slice with tokens of other slices and in the whole table.
TEST(CudaEmbedding, IdsCheckedGroupOnTheDeviceBitForBit) {
  WEFT_REQUIRE_GPU();
  const ExecContext gec = ExecContext::cuda(0);
  for (const bool slice : {false, true}) {
    SCOPED_TRACE(slice ? "vocab slice" : "whole table");
    EmbeddingOptions opt;
    if (slice) {
      opt.vocab_start = 1000;
      opt.valid_vocab = 50304;
    }
    const int64_t rows = slice ? 3000 : 5000, channels = 771;
    const Tensor tokens = random_tokens(3, 401, 5000, 9);
    const Shape act{3, 401, channels};
    const Tensor dout = random_tensor(act, 10, -1, 1, DType::bf16);
    Tensor dwte = random_tensor({rows, channels}, 11), gdwte = gpu(dwte);
    embedding_backward(cpu_ec, dout, tokens, dwte, opt);
    EmbeddingOptions checked = opt;
    checked.ids_checked = true;
    embedding_backward(gec, gpu(dout), gpu(tokens), gdwte, checked);
    EXPECT_TRUE(bitwise_equal(dwte, gdwte));
    const Tensor wte = random_tensor({rows, channels}, 12);
    Tensor out = Tensor::empty(act), gout = gpu(Tensor::zeros(act));
    embedding_forward(cpu_ec, tokens, wte, out, opt);
    embedding_forward(gec, gpu(tokens), gpu(wte), gout, checked);
    EXPECT_TRUE(bitwise_equal(out, gout));
  }
}

}  // namespace
}  // namespace weft::kernels
