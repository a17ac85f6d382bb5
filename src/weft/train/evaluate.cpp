#include "weft/train/evaluate.h"

#include <algorithm>
#include <vector>

#include "weft/kernels/loss.h"

namespace weft::train {

namespace {

// Mean loss of windows starting at `starts` with `len` targets each, padded
// to `padded` positions whose targets are ignored.
double window_loss(nn::Gpt& model, std::span<const int32_t> tokens,
                   const std::vector<int64_t>& starts, int64_t len, int64_t padded) {
  const int64_t n = static_cast<int64_t>(starts.size());
  std::vector<int32_t> in(static_cast<size_t>(n * padded), 0);
  std::vector<int32_t> tg(static_cast<size_t>(n * padded), kernels::kIgnoreIndex);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t* w = tokens.data() + starts[static_cast<size_t>(i)];
    std::copy(w, w + len, in.begin() + i * padded);
    std::copy(w + 1, w + len + 1, tg.begin() + i * padded);
  }
  nn::Ctx ctx(nullptr, false);
  const Tensor tokens_in = Tensor::from_i32({n, padded}, in),
               targets = Tensor::from_i32({n, padded}, tg);
  const parallel::ParallelContext& pc = *model.context();
  if (pc.cp_size() == 1) return model.forward_loss(ctx, tokens_in, targets);
  // Context parallelism: each rank's mean over its chunks' scored targets,
  // weighted by their count, summed over the group.
  const Tensor local = model.forward_loss_tensor(ctx, tokens_in, targets).to(Device::cpu());
  const float* v = local.data<float>();
  Tensor sums = Tensor::empty({2}, DType::f64);
  // A rank whose chunks hold only padding scores nothing.
  sums.data<double>()[0] = v[1] > 0 ? static_cast<double>(v[0]) * v[1] : 0.0;
  sums.data<double>()[1] = v[1];
  pc.cp->all_reduce(sums).wait();
  return sums.data<double>()[0] / std::max(sums.data<double>()[1], 1.0);
}

}  // namespace

EvalResult evaluate_tokens(nn::Gpt& model, std::span<const int32_t> tokens, int64_t batch,
                           const std::function<void(int64_t, int64_t)>& progress) {
  const nn::GptConfig& cfg = model.config();
  const parallel::ParallelContext& pc = *model.context();
  const int tp = pc.tp_size();
  WEFT_CHECK(pc.sp != nn::SequenceParallel::batch || tp == 1,
             "evaluation passes the same tokens to every TP rank: build the model without "
             "--sp batch");
  WEFT_CHECK(batch >= 1, "the evaluation batch must hold at least one window, got {}", batch);
  const int64_t n = static_cast<int64_t>(tokens.size());
  WEFT_CHECK(n >= 2, "{} tokens are too few to evaluate (at least 2 are needed)", n);
  for (int32_t t : tokens) {
    WEFT_CHECK(t >= 0 && t < cfg.vocab,
               "the data holds token {}, outside the model's vocabulary of {}: evaluate with data "
               "tokenized for this model",
               t, cfg.vocab);
  }
  const int64_t seq = cfg.seq, total = n - 1;
  const int64_t full = total / seq, rem = total % seq;
  double sum = 0;
  int64_t done = 0;
  for (int64_t w = 0; w < full; w += batch) {
    std::vector<int64_t> starts;
    for (int64_t k = w; k < std::min(full, w + batch); ++k) starts.push_back(k * seq);
    const int64_t count = static_cast<int64_t>(starts.size()) * seq;
    sum += window_loss(model, tokens, starts, seq, seq) * static_cast<double>(count);
    done += count;
    if (progress) progress(done, total);
  }
  if (rem > 0) {
    int64_t padded = rem;
    // Whole SP shards, and whole chunks under context parallelism.
    const int64_t unit =
        (pc.sp == nn::SequenceParallel::seq ? tp : 1) * (pc.cp_size() > 1 ? 2 * pc.cp_size() : 1);
    padded = (rem + unit - 1) / unit * unit;
    sum += window_loss(model, tokens, {full * seq}, rem, padded) * static_cast<double>(rem);
    done += rem;
    if (progress) progress(done, total);
  }
  return {.loss = sum / static_cast<double>(total), .tokens = total};
}

}  // namespace weft::train
