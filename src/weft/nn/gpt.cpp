#include "weft/nn/gpt.h"

#include "weft/parallel/mappings.h"

namespace weft::nn {

GptConfig gpt_preset(const std::string& name) {
  GptConfig c;
  if (name == "tiny") {
    c.vocab = 256;
    c.seq = 128;
    c.layers = 4;
    c.width = 128;
    c.heads = 4;
    return c;
  }
  if (name == "gpt2-124m") {
    c.vocab = 50257;
    c.seq = 1024;
    c.layers = 12;
    c.width = 768;
    c.heads = 12;
    return c;
  }
  WEFT_FAIL("unknown preset '{}': use tiny or gpt2-124m", name);
}

void validate(const GptConfig& c, int tp) {
  WEFT_CHECK(c.vocab >= 2 && c.seq >= 1 && c.layers >= 1 && c.width >= 1 && c.heads >= 1 &&
                 c.vocab_pad >= 1,
             "model sizes must be positive (vocab {}, seq {}, layers {}, width {}, heads {}, "
             "vocab_pad {})",
             c.vocab, c.seq, c.layers, c.width, c.heads, c.vocab_pad);
  WEFT_CHECK(c.width % c.heads == 0, "width {} is not divisible by heads {}", c.width, c.heads);
  WEFT_CHECK(c.heads % tp == 0,
             "heads {} is not divisible by tp {}: choose a tp that divides heads", c.heads, tp);
  const int64_t rows = padded_vocab_size(c.vocab, c.vocab_pad);
  WEFT_CHECK(rows % tp == 0,
             "the padded vocabulary ({} rows) is not divisible by tp {}: set vocab_pad to a "
             "multiple of {}",
             rows, tp, tp);
  WEFT_CHECK(c.dropout >= 0.0f && c.dropout < 1.0f, "dropout must be in [0, 1), got {}", c.dropout);
}

void validate(const GptConfig& c) { validate(c, c.tp ? c.tp->size() : 1); }

namespace {
GptConfig checked(GptConfig c) {
  validate(c);
  return c;
}
}  // namespace

Gpt::Gpt(GptConfig cfg)
    : Module(""),
      cfg_(checked(std::move(cfg))),
      embedding_({.vocab = cfg_.vocab,
                  .max_seq = cfg_.seq,
                  .channels = cfg_.width,
                  .vocab_pad = cfg_.vocab_pad,
                  .tp = cfg_.tp,
                  .sp = cfg_.sp,
                  .compute = cfg_.compute,
                  .seed = cfg_.seed}),
      ln_f_({.name = "ln_f",
             .width = cfg_.width,
             .tp = cfg_.tp,
             .sp = cfg_.sp,
             .compute = cfg_.compute}),
      head_(embedding_) {
  for (int64_t i = 0; i < cfg_.layers; ++i) {
    layers_.push_back(
        std::make_unique<TransformerLayer>(TransformerLayerConfig{.name = format("h.{}", i),
                                                                  .width = cfg_.width,
                                                                  .heads = cfg_.heads,
                                                                  .layers = cfg_.layers,
                                                                  .attention_dropout = cfg_.dropout,
                                                                  .hidden_dropout = cfg_.dropout,
                                                                  .tp = cfg_.tp,
                                                                  .sp = cfg_.sp,
                                                                  .compute = cfg_.compute,
                                                                  .seed = cfg_.seed,
                                                                  .plan = cfg_.plan}));
  }
}

std::vector<Module*> Gpt::children() {
  std::vector<Module*> out{&embedding_};
  for (auto& l : layers_) out.push_back(l.get());
  out.push_back(&ln_f_);
  return out;
}

Tensor Gpt::tokens_for_group(const Tensor& tokens) const {
  WEFT_CHECK(tokens.dtype() == DType::i32 && tokens.dim() == 2,
             "tokens must be (batch, sequence) i32, got {} {}", dtype_name(tokens.dtype()),
             tokens.shape());
  WEFT_CHECK(tokens.size(1) <= cfg_.seq, "sequence of {} tokens is longer than the context {}",
             tokens.size(1), cfg_.seq);
  if (cfg_.sp != SequenceParallel::batch || !cfg_.tp || cfg_.tp->size() == 1) return tokens;
  return parallel::all_gather_along(*cfg_.tp, tokens, 0);
}

Tensor Gpt::forward_hidden(Ctx& ctx, const Tensor& tokens) {
  Tensor x = embedding_.forward(ctx, tokens_for_group(tokens));
  for (auto& l : layers_) x = l->forward(ctx, x);
  return ln_f_.forward(ctx, x);
}

Tensor Gpt::forward(Ctx& ctx, const Tensor& tokens) {
  return head_.forward(ctx, forward_hidden(ctx, tokens));
}

Tensor Gpt::backward(Ctx& ctx, const Tensor& dlogits) {
  Tensor dx = ln_f_.backward(ctx, head_.backward(ctx, dlogits));
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) dx = (*it)->backward(ctx, dx);
  embedding_.backward(ctx, dx);
  return {};
}

float Gpt::forward_loss(Ctx& ctx, const Tensor& tokens, const Tensor& targets) {
  Tensor x = forward_hidden(ctx, tokens);
  return head_.forward_loss(ctx, x, tokens_for_group(targets));
}

void Gpt::backward_loss(Ctx& ctx, float dloss, const GradsReady& ready) {
  auto done = [&](Module& m) {
    if (ready) ready(m.parameters());
  };
  Tensor dx = ln_f_.backward(ctx, head_.backward_loss(ctx, dloss));
  done(ln_f_);
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) {
    dx = (*it)->backward(ctx, dx);
    done(**it);
  }
  // wte also received the tied head's gradient above: it is final only now.
  embedding_.backward(ctx, dx);
  done(embedding_);
}

int64_t Gpt::num_parameters_global() {
  int64_t n = 0;
  for (Parameter* p : parameters()) n += p->spec.global_shape.numel();
  return n;
}

}  // namespace weft::nn
