#include "weft/kernels/impl/embedding.h"

#include <algorithm>

#include "weft/core/exec_context.h"
#include "weft/kernels/elementwise.h"

namespace weft::kernels::impl {

namespace {

using detail::load;
using detail::store;
using detail::with_floats;

// The table (rows, C) and the activation (B, T, C) of one kernel.
// (Copied into plain variables, not structured bindings: clang 14, which the
// fuzz build uses, cannot capture bindings in the kernels' lambdas.)
struct Shapes {
  int64_t table_rows, channels, batch, seq;
};
Shapes shapes_of(const Tensor& table, const Tensor& act) {
  return {table.size(0), table.size(1), act.size(0), act.size(1)};
}

// Validates tokens (B,T) (their shape and the options checked in
// kernels/embedding.cpp) against the vocabulary before any parallel loop runs
// (an exception cannot leave an OpenMP region).
void check_tokens(const Tensor& tokens, int64_t seq, int64_t table_rows,
                  const EmbeddingOptions& opt, const char* op) {
  const int64_t valid_vocab = opt.valid_vocab > 0 ? opt.valid_vocab : opt.vocab_start + table_rows;
  const int32_t* tok = tokens.data<int32_t>();
  for (int64_t i = 0; i < tokens.numel(); ++i) {
    WEFT_CHECK(tok[i] >= 0 && tok[i] < valid_vocab,
               "{}: token id {} at (batch {}, position {}) is outside the vocabulary [0, {}); "
               "check the data's token ids against the model's vocab_size",
               op, tok[i], i / seq, i % seq, valid_vocab);
  }
}

}  // namespace

template <>
void embedding_forward<Backend::cpu>(const ExecContext& ec, const Tensor& tokens, const Tensor& wte,
                                     Tensor& out, const EmbeddingOptions& opt) {
  constexpr const char* op = "embedding_forward";
  const Shapes shapes = shapes_of(wte, out);
  const int64_t vocab = shapes.table_rows, channels = shapes.channels, batch = shapes.batch,
                seq = shapes.seq;
  check_tokens(tokens, seq, vocab, opt, op);
  const int32_t* tok = tokens.data<int32_t>();
  const int64_t rows = batch * seq;
  with_floats(wte, [&](const auto* table) {
    with_floats(out, [&](auto* y) {
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
      for (int64_t n = 0; n < rows; ++n) {
        const int64_t local = tok[n] - opt.vocab_start;
        auto* dst = y + n * channels;
        if (local < 0 || local >= vocab) {
          for (int64_t c = 0; c < channels; ++c) store(dst, c, 0.0f);
          continue;
        }
        const auto* src = table + local * channels;
        for (int64_t c = 0; c < channels; ++c) store(dst, c, load(src, c));
      }
    });
  });
}

template <>
void embedding_backward<Backend::cpu>(const ExecContext& ec, const Tensor& dout,
                                      const Tensor& tokens, Tensor& dwte,
                                      const EmbeddingOptions& opt) {
  constexpr const char* op = "embedding_backward";
  const Shapes shapes = shapes_of(dwte, dout);
  const int64_t vocab = shapes.table_rows, channels = shapes.channels, batch = shapes.batch,
                seq = shapes.seq;
  check_tokens(tokens, seq, vocab, opt, op);
  const int32_t* tok = tokens.data<int32_t>();
  float* grad = dwte.data<float>();
  const int64_t rows = batch * seq;
  // Repeated tokens add into the same row, so threads split the columns
  // rather than the tokens: each column block is owned by one thread, which
  // walks the tokens in order. No two threads touch one element, and every
  // element sums its contributions in token order for any thread count.
  constexpr int64_t kBlock = 16;  // one 64-byte cache line of f32
  const int64_t blocks = (channels + kBlock - 1) / kBlock;
  with_floats(dout, [&](const auto* dy) {
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t c0 = b * kBlock, c1 = std::min(channels, c0 + kBlock);
      for (int64_t n = 0; n < rows; ++n) {
        const int64_t local = tok[n] - opt.vocab_start;
        if (local < 0 || local >= vocab) continue;
        float* g = grad + local * channels;
        const auto* d = dy + n * channels;
        for (int64_t c = c0; c < c1; ++c) g[c] += load(d, c);
      }
    }
  });
}

template <>
void position_embedding_forward<Backend::cpu>(const ExecContext& ec, const Tensor& wpe, Tensor& out,
                                              int64_t pos_offset, bool sequence_major) {
  const Shapes shapes = shapes_of(wpe, out);
  const int64_t channels = shapes.channels;
  const int64_t batch = sequence_major ? shapes.seq : shapes.batch;
  const int64_t seq = sequence_major ? shapes.batch : shapes.seq;
  const float* table = wpe.data<float>() + pos_offset * channels;
  const int64_t rows = batch * seq;
  with_floats(out, [&](auto* y) {
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
    for (int64_t n = 0; n < rows; ++n) {
      const int64_t t = sequence_major ? n / batch : n % seq;
      const float* src = table + t * channels;
      auto* dst = y + n * channels;
      for (int64_t c = 0; c < channels; ++c) store(dst, c, load(dst, c) + src[c]);
    }
  });
}

template <>
void position_embedding_backward<Backend::cpu>(const ExecContext& ec, const Tensor& dout,
                                               Tensor& dwpe, int64_t pos_offset,
                                               bool sequence_major) {
  const Shapes shapes = shapes_of(dwpe, dout);
  const int64_t channels = shapes.channels;
  const int64_t batch = sequence_major ? shapes.seq : shapes.batch;
  const int64_t seq = sequence_major ? shapes.batch : shapes.seq;
  float* grad = dwpe.data<float>() + pos_offset * channels;
  with_floats(dout, [&](const auto* dy) {
  // One thread per position row, summing the batch in order: deterministic.
#pragma omp parallel for num_threads(ec.threads()) schedule(static)
    for (int64_t t = 0; t < seq; ++t) {
      float* g = grad + t * channels;
      for (int64_t b = 0; b < batch; ++b) {
        const int64_t row = sequence_major ? t * batch + b : b * seq + t;
        const auto* d = dy + row * channels;
        for (int64_t c = 0; c < channels; ++c) g[c] += load(d, c);
      }
    }
  });
}

}  // namespace weft::kernels::impl
