// Evaluation of a GPT on a token sequence: the mean next-token cross-entropy
// over every token, each predicted exactly once.
//
// The tokens t0..t(N-1) are cut into windows of seq+1 tokens starting at
// k·seq, so each target t1..t(N-1) appears in exactly one window; the last
// window may be shorter. Windows run `batch` at a time and the loss is the
// token-weighted mean. Collective over the model's TP group: every rank
// passes the same tokens (batch sequence parallelism is not supported here;
// build the model without it to evaluate).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <span>

#include "weft/nn/gpt.h"

namespace weft::train {

struct EvalResult {
  double loss = 0;     // mean cross-entropy in nats
  int64_t tokens = 0;  // targets scored (N - 1)
  double perplexity() const { return std::exp(loss); }
};

// progress(done, total): targets scored so far, after each batch.
EvalResult evaluate_tokens(nn::Gpt& model, std::span<const int32_t> tokens, int64_t batch,
                           const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace weft::train
