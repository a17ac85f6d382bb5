#include "weft/nn/gpt.h"

#include "weft/kernels/transpose.h"
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

namespace {
const GptConfig& checked(const GptConfig& c, const ContextPtr& pc) {
  WEFT_CHECK(pc != nullptr, "the GPT model needs a parallel context");
  validate(c, pc->tp_size());
  return c;
}
}  // namespace

Gpt::Gpt(ContextPtr context, GptConfig cfg)
    : Module(""),
      pc_(std::move(context)),
      cfg_(checked(cfg, pc_)),
      embedding_(pc_, {.vocab = cfg_.vocab,
                       .max_seq = cfg_.seq,
                       .channels = cfg_.width,
                       .vocab_pad = cfg_.vocab_pad,
                       .init_std = cfg_.init_std}),
      ln_f_(pc_, {.name = "ln_f", .width = cfg_.width}),
      head_(embedding_) {
  for (int64_t i = 0; i < cfg_.layers; ++i) {
    layers_.push_back(std::make_unique<TransformerLayer>(
        pc_, TransformerLayerConfig{.name = format("h.{}", i),
                                    .width = cfg_.width,
                                    .heads = cfg_.heads,
                                    .layers = cfg_.layers,
                                    .attention_dropout = cfg_.dropout,
                                    .hidden_dropout = cfg_.dropout,
                                    .init_std = cfg_.init_std,
                                    .plan = cfg_.plan}));
  }
}

namespace {

// (A, B, ...) -> (B, A, ...): tokens and targets into the sequence-major
// layout, logits back out of it.
Tensor swap01(const ExecContext& ec, const Tensor& x) {
  Shape s = x.shape();
  std::swap(s[0], s[1]);
  Tensor out = ec.empty(s, x.dtype(), MemoryTag::activations);
  kernels::transpose01(ec, x, out);
  return out;
}

}  // namespace

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
  // Token ids come from the host (the data loader): the model's device takes a copy.
  const Tensor here = tokens.to(pc_->exec.device());
  if (pc_->sp != SequenceParallel::batch || !pc_->tp_group()) return here;
  return parallel::all_gather_along(pc_->exec, *pc_->tp, here, 0);
}

Tensor Gpt::forward_hidden(Ctx& ctx, const Tensor& tokens) {
  Tensor x = embedding_.forward(ctx, tokens_for_group(tokens));
  for (auto& l : layers_) x = l->forward(ctx, x);
  return ln_f_.forward(ctx, x);
}

Tensor Gpt::forward(Ctx& ctx, const Tensor& tokens) {
  Tensor logits = head_.forward(ctx, forward_hidden(ctx, tokens));
  if (pc_->token_layout() == parallel::TokenLayout::sequence_major) {
    logits = swap01(pc_->exec, logits);
  }
  return logits;
}

Tensor Gpt::backward(Ctx& ctx, const Tensor& dlogits) {
  Tensor g = dlogits;
  if (pc_->token_layout() == parallel::TokenLayout::sequence_major) g = swap01(pc_->exec, g);
  Tensor dx = ln_f_.backward(ctx, head_.backward(ctx, g));
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) dx = (*it)->backward(ctx, dx);
  embedding_.backward(ctx, dx);
  return {};
}

float Gpt::forward_loss(Ctx& ctx, const Tensor& tokens, const Tensor& targets) {
  Tensor x = forward_hidden(ctx, tokens);
  Tensor t = tokens_for_group(targets);
  if (pc_->token_layout() == parallel::TokenLayout::sequence_major) t = swap01(pc_->exec, t);
  return head_.forward_loss(ctx, x, t);
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
