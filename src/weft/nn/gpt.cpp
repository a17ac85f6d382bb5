#include "weft/nn/gpt.h"

#include <cmath>

#include "weft/kernels/transpose.h"
#include "weft/parallel/mappings.h"

namespace weft::nn {

const char* position_kind_name(PositionKind k) {
  return k == PositionKind::rotary ? "rotary" : "learned";
}

PositionKind parse_position_kind(const std::string& name) {
  if (name == "learned") return PositionKind::learned;
  if (name == "rotary") return PositionKind::rotary;
  WEFT_FAIL("unknown positions '{}': use learned or rotary", name);
}

namespace {

// Llama's architecture choices on a shape.
GptConfig llama(GptConfig c, int64_t kv_heads, int64_t hidden) {
  c.norm = NormKind::rms;
  c.norm_eps = 1e-5f;
  c.mlp = MlpKind::swiglu;
  c.hidden = hidden;
  c.positions = PositionKind::rotary;
  c.rope_theta = 10000.0;
  c.kv_heads = kv_heads;
  c.bias = false;
  c.tied_head = false;
  return c;
}

GptConfig shape(int64_t vocab, int64_t seq, int64_t layers, int64_t width, int64_t heads) {
  GptConfig c;
  c.vocab = vocab;
  c.seq = seq;
  c.layers = layers;
  c.width = width;
  c.heads = heads;
  return c;
}

}  // namespace

const std::vector<std::string>& gpt_preset_names() {
  static const std::vector<std::string> names{"tiny",     "gpt2-124m",   "gpt2-350m", "llama-tiny",
                                              "llama-1b", "llama3-405b", "moe-tiny"};
  return names;
}

GptConfig gpt_preset(const std::string& name) {
  if (name == "tiny") return shape(256, 128, 4, 128, 4);
  if (name == "gpt2-124m") return shape(50257, 1024, 12, 768, 12);
  if (name == "gpt2-350m") return shape(50257, 1024, 24, 1024, 16);
  // SwiGLU's hidden size about 8/3 of the width (Llama's rule), a multiple of 32.
  if (name == "llama-tiny") return llama(shape(256, 128, 4, 128, 8), 4, 352);
  if (name == "llama-1b") return llama(shape(32000, 2048, 22, 2048, 32), 4, 5632);
  // Llama 3 405B (Llama 3 paper, Table 3): rope base 500000, context 8192.
  if (name == "llama3-405b") {
    GptConfig c = llama(shape(128256, 8192, 126, 16384, 128), 8, 53248);
    c.rope_theta = 500000.0;
    return c;
  }
  if (name == "moe-tiny") {
    GptConfig c = llama(shape(256, 128, 4, 128, 8), 4, 352);
    c.moe_experts = 4;
    return c;
  }
  WEFT_FAIL(
      "unknown preset '{}': use tiny, gpt2-124m, gpt2-350m, llama-tiny, llama-1b, llama3-405b or "
      "moe-tiny",
      name);
}

namespace {
void validate_moe(const GptConfig& c) {
  WEFT_CHECK(c.moe_experts == 0 || c.moe_experts >= 2,
             "moe_experts must be 0 (dense) or at least 2, got {}", c.moe_experts);
  WEFT_CHECK(c.moe_top_k == 1 || c.moe_top_k == 2, "moe_top_k must be 1 or 2, got {}", c.moe_top_k);
  WEFT_CHECK(c.moe_every >= 1, "moe_every must be at least 1, got {}", c.moe_every);
  WEFT_CHECK(c.moe_capacity_factor >= 0.0f && c.moe_aux_coef >= 0.0f && c.moe_z_coef >= 0.0f,
             "moe_capacity_factor, moe_aux_coef and moe_z_coef must be >= 0, got {}, {}, {}",
             c.moe_capacity_factor, c.moe_aux_coef, c.moe_z_coef);
}
}  // namespace

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
  const int64_t kv = c.kv_head_count();
  WEFT_CHECK(kv >= 1 && c.heads % kv == 0,
             "kv_heads {} must divide heads {} (each key/value head serves heads/kv_heads query "
             "heads)",
             kv, c.heads);
  WEFT_CHECK(kv % tp == 0 || tp % kv == 0,
             "kv_heads {} does not fit tp {}: tp must divide kv_heads (each rank then holds "
             "kv_heads/tp of them) or be a multiple of kv_heads (each key/value head then "
             "replicated on tp/kv_heads ranks); choose such a tp or kv_heads",
             kv, tp);
  WEFT_CHECK(c.mlp_hidden() >= 1 && c.mlp_hidden() % tp == 0,
             "hidden {} (the MLP's size) is not divisible by tp {}: set hidden to a multiple of {}",
             c.mlp_hidden(), tp, tp);
  WEFT_CHECK(c.positions != PositionKind::rotary || (c.width / c.heads) % 2 == 0,
             "rotary positions need an even head size, got width {} / heads {} = {}", c.width,
             c.heads, c.width / c.heads);
  WEFT_CHECK(c.rope_theta > 0.0, "rope_theta must be positive, got {}", c.rope_theta);
  WEFT_CHECK(c.norm_eps > 0.0f, "norm_eps must be positive, got {}", c.norm_eps);
  validate_moe(c);
}

namespace {
const GptConfig& checked(const GptConfig& c, const ContextPtr& pc) {
  WEFT_CHECK(pc != nullptr, "the GPT model needs a parallel context");
  validate(c, pc->tp_size());
  return c;
}

GptStage checked_stage(GptStage s, const GptConfig& c) {
  if (s.end_layer < 0) s.end_layer = c.layers;
  WEFT_CHECK(s.first_layer >= 0 && s.first_layer < s.end_layer && s.end_layer <= c.layers,
             "pipeline stage of layers [{}, {}) does not fit a model of {} layers", s.first_layer,
             s.end_layer, c.layers);
  WEFT_CHECK(s.first == (s.first_layer == 0) && s.last == (s.end_layer == c.layers),
             "pipeline stage of layers [{}, {}): the first stage starts at layer 0 and the last "
             "ends at layer {}",
             s.first_layer, s.end_layer, c.layers);
  return s;
}
}  // namespace

Gpt::Gpt(ContextPtr context, GptConfig cfg, GptStage stage)
    : Module(""),
      pc_(std::move(context)),
      cfg_(checked(cfg, pc_)),
      stage_(checked_stage(stage, cfg_)),
      // Positions enter on the first stage only; a last stage builds the
      // embedding for its tied head's copy of wte.
      embedding_(pc_,
                 {.vocab = cfg_.vocab,
                  .max_seq = cfg_.seq,
                  .channels = cfg_.width,
                  .vocab_pad = cfg_.vocab_pad,
                  .init_std = cfg_.init_std,
                  .learned_positions = cfg_.positions == PositionKind::learned && stage_.first}),
      ln_f_(cfg_.norm, pc_, {.name = "ln_f", .width = cfg_.width, .eps = cfg_.norm_eps}),
      head_(embedding_, cfg_.tied_head) {
  if (holds_tied_copy()) embedding_.wte().spec.replicated_over.emplace_back("pp");
  if (cfg_.tied_head && stage_.first && !stage_.last) {
    embedding_.wte().spec.replicated_over.emplace_back("pp");
  }
  // One share group for every layer's replicated KV heads (TP > kv_heads).
  const auto kv_group = kv_share_group(*pc_, cfg_.kv_head_count());
  for (int64_t i = stage_.first_layer; i < stage_.end_layer; ++i) {
    layers_.push_back(std::make_unique<TransformerLayer>(
        pc_,
        TransformerLayerConfig{.name = format("h.{}", i),
                               .width = cfg_.width,
                               .heads = cfg_.heads,
                               .kv_heads = cfg_.kv_head_count(),
                               .kv_group = kv_group,
                               .hidden = cfg_.mlp_hidden(),
                               .layers = cfg_.layers,
                               .attention_dropout = cfg_.dropout,
                               .hidden_dropout = cfg_.dropout,
                               .norm = cfg_.norm,
                               .eps = cfg_.norm_eps,
                               .mlp = cfg_.mlp,
                               .bias = cfg_.bias,
                               .rotary = cfg_.positions == PositionKind::rotary,
                               .rope_theta = cfg_.rope_theta,
                               .max_positions = cfg_.seq,
                               .init_std = cfg_.init_std,
                               .plan = cfg_.plan,
                               .moe_experts = cfg_.moe_layer(i) ? cfg_.moe_experts : 0,
                               .moe_top_k = cfg_.moe_top_k,
                               .moe_capacity_factor = cfg_.moe_capacity_factor,
                               .moe_aux_coef = cfg_.moe_aux_coef,
                               .moe_z_coef = cfg_.moe_z_coef,
                               .recompute = cfg_.recompute_layers == 0 || i < cfg_.recompute_layers
                                                ? cfg_.recompute
                                                : Recompute::none}));
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
  std::vector<Module*> out;
  if (stage_.first || holds_tied_copy()) out.push_back(&embedding_);
  for (auto& l : layers_) out.push_back(l.get());
  if (stage_.last) {
    out.push_back(&ln_f_);
    // A tied head owns no parameter (its weight is wte).
    if (!cfg_.tied_head) out.push_back(&head_);
  }
  return out;
}

Shape Gpt::stream_shape(int64_t batch, int64_t seq) const {
  const int tp = pc_->tp_size();
  switch (pc_->sp) {
    case SequenceParallel::seq: return Shape{seq / tp, batch, cfg_.width};
    case SequenceParallel::batch:
    case SequenceParallel::off: return Shape{batch, seq, cfg_.width};
  }
  return Shape{batch, seq, cfg_.width};
}

DType Gpt::stream_dtype() const { return pc_->compute(); }

namespace {
bool all_finite(const Tensor& t) {
  for (float v : t.to_vector()) {
    if (!std::isfinite(v)) return false;
  }
  return true;
}
}  // namespace

Tensor Gpt::stage_forward(Ctx& ctx, const Tensor& input, const Tensor& targets,
                          std::string* nonfinite) {
  const auto check = [&](const Tensor& t, const std::string& where) {
    if (nonfinite && nonfinite->empty() && !all_finite(t)) *nonfinite = where;
  };
  const auto host_i32 = [](const Tensor& t) {
    return t.device().is_cpu() && t.dim() == 2 && t.dtype() == DType::i32;
  };
  const bool batch_sp = pc_->sp == SequenceParallel::batch && pc_->tp_group();
  TransformerLayer::Stream s;
  if (stage_.first) {
    const bool checked = !batch_sp && host_i32(input);
    if (checked) check_host_ids(input, false);
    s.x = embedding_.forward(ctx, tokens_for_group(input), 0, checked);
    check(s.x, "the embedding");
  } else {
    s.x = input;
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    Norm* next = i + 1 < layers_.size() ? layers_[i + 1]->input_norm()
                 : stage_.last          ? &ln_f_
                                        : nullptr;
    s = layers_[i]->forward_stream(ctx, s, next);
    check(s.x, format("layer h.{}", stage_.first_layer + static_cast<int64_t>(i)));
  }
  if (!stage_.last) return s.x;
  const Tensor x = s.normed.defined() ? s.normed : ln_f_.forward(ctx, s.x);
  const bool checked = !batch_sp && host_i32(targets);
  if (checked) check_host_ids(targets, true);
  Tensor t = tokens_for_group(targets);
  if (pc_->token_layout() == parallel::TokenLayout::sequence_major) t = swap01(pc_->exec, t);
  Tensor loss = head_.forward_loss_tensor(ctx, x, t, kernels::kIgnoreIndex, checked);
  check(loss.narrow(0, 1), "the head and loss");
  return loss;
}

Tensor Gpt::stage_backward(Ctx& ctx, const Tensor& dy, float dloss, const GradsReady& ready) {
  auto done = [&](Module& m) {
    if (ready) ready(m.parameters());
  };
  for (auto& l : layers_) {
    if (MoeMLP* m = l->moe()) m->router().set_loss_scale(ctx, dloss);
  }
  Tensor dx = dy;
  if (stage_.last) {
    dx = head_.backward_loss(ctx, dloss);
    if (!cfg_.tied_head) done(head_);
    // The copy of wte took the head's gradient: final here.
    if (holds_tied_copy()) done(embedding_);
    dx = ln_f_.backward(ctx, dx);
    done(ln_f_);
  }
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) {
    dx = (*it)->backward(ctx, dx);
    done(**it);
  }
  if (!stage_.first) return dx;
  embedding_.backward(ctx, dx);
  done(embedding_);
  return {};
}

Tensor Gpt::tokens_for_group(const Tensor& tokens) const {
  WEFT_CHECK(tokens.dtype() == DType::i32 && tokens.dim() == 2,
             "tokens must be (batch, sequence) i32, got {} {}", dtype_name(tokens.dtype()),
             tokens.shape());
  WEFT_CHECK(tokens.size(1) <= cfg_.seq, "sequence of {} tokens is longer than the context {}",
             tokens.size(1), cfg_.seq);
  // Token ids come from the host (the data loader): the model's device takes a
  // copy, under context parallelism of this rank's chunks of each sequence.
  const Tensor here = pc_->cp_size() > 1
                          ? pc_->exec.upload(parallel::context::local_columns(
                                                 pc_->exec, tokens, pc_->cp_chunks(tokens.size(1))),
                                             MemoryTag::activations)
                          : pc_->exec.upload(tokens, MemoryTag::activations);
  if (pc_->sp != SequenceParallel::batch || !pc_->tp_group()) return here;
  return parallel::all_gather_along(pc_->exec, *pc_->tp, here, 0);
}

Tensor Gpt::forward_hidden(Ctx& ctx, const Tensor& tokens, bool ids_checked) {
  TransformerLayer::Stream s{embedding_.forward(ctx, tokens_for_group(tokens), 0, ids_checked), {}};
  // Each layer runs the norm that reads its output (the next layer's ln_1,
  // then ln_f) fused with its last residual add.
  for (size_t i = 0; i < layers_.size(); ++i) {
    Norm* next = i + 1 < layers_.size() ? layers_[i + 1]->input_norm() : &ln_f_;
    s = layers_[i]->forward_stream(ctx, s, next);
  }
  return s.normed.defined() ? s.normed : ln_f_.forward(ctx, s.x);
}

Tensor Gpt::forward(Ctx& ctx, const Tensor& tokens) {
  Tensor logits = head_.forward(ctx, forward_hidden(ctx, tokens));
  if (pc_->token_layout() == parallel::TokenLayout::sequence_major) {
    logits = swap01(pc_->exec, logits);
  }
  return logits;
}

Tensor Gpt::forward_cached(Ctx& ctx, const Tensor& tokens, std::span<const KvCacheView> caches,
                           std::span<const int64_t> rows) {
  WEFT_CHECK(!pc_->sequence_parallel(),
             "generation with a key/value cache runs without sequence parallelism (--sp off)");
  WEFT_CHECK(static_cast<int64_t>(caches.size()) == cfg_.layers,
             "generation needs a cache for each of the {} layers, got {}", cfg_.layers,
             caches.size());
  const Tensor ids = tokens_for_group(tokens);
  const int64_t batch = ids.size(0), seq = ids.size(1);
  WEFT_CHECK(static_cast<int64_t>(rows.size()) == batch,
             "generation: {} rows to read for a batch of {}", rows.size(), batch);
  for (const KvCacheView& c : caches) {
    WEFT_CHECK(c.start.data() == caches[0].start.data() && c.start.size() == caches[0].start.size(),
               "generation: every layer's cache must hold the same positions");
  }
  for (size_t b = 0; b < rows.size(); ++b) {
    WEFT_CHECK(rows[b] >= 0 && rows[b] < seq, "generation: row {} of entry {} is not one of its {}",
               rows[b], b, seq);
  }
  TransformerLayer::Stream s{embedding_.forward_at(ctx, ids, caches[0].start), {}};
  for (size_t i = 0; i < layers_.size(); ++i) {
    Norm* next = i + 1 < layers_.size() ? layers_[i + 1]->input_norm() : &ln_f_;
    s = layers_[i]->forward_stream(ctx, s, next, &caches[i]);
  }
  const Tensor h = s.normed.defined() ? s.normed : ln_f_.forward(ctx, s.x);
  // The rows the logits are wanted for: one per entry.
  Tensor picked = h;
  if (seq > 1) {
    const ExecContext& ec = pc_->exec;
    picked = ec.empty({batch, 1, cfg_.width}, h.dtype(), MemoryTag::activations);
    const Tensor all = h.reshape({batch * seq, cfg_.width});
    for (int64_t b = 0; b < batch; ++b) {
      picked.narrow(b, 1).copy_from(
          all.narrow(b * seq + rows[static_cast<size_t>(b)], 1).reshape({1, 1, cfg_.width}));
    }
  }
  const Tensor logits = head_.forward(ctx, picked);
  return logits.reshape({batch, logits.size(2)});
}

Tensor Gpt::backward(Ctx& ctx, const Tensor& dlogits) {
  Tensor g = dlogits;
  if (pc_->token_layout() == parallel::TokenLayout::sequence_major) g = swap01(pc_->exec, g);
  Tensor dx = ln_f_.backward(ctx, head_.backward(ctx, g));
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) dx = (*it)->backward(ctx, dx);
  embedding_.backward(ctx, dx);
  return {};
}

void Gpt::check_host_ids(const Tensor& ids, bool targets) const {
  const int32_t* v = ids.data<int32_t>();
  const int64_t seq = ids.size(1);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (targets && v[i] == kernels::kIgnoreIndex) continue;
    WEFT_CHECK(v[i] >= 0 && v[i] < cfg_.vocab,
               "{} {} at (batch {}, position {}) is outside the vocabulary [0, {}){}; check the "
               "data's token ids against the model's vocab_size",
               targets ? "target" : "token id", v[i], i / seq, i % seq, cfg_.vocab,
               targets ? format(" and is not the ignore_index {}", kernels::kIgnoreIndex) : "");
  }
}

float Gpt::forward_loss(Ctx& ctx, const Tensor& tokens, const Tensor& targets) {
  const Tensor loss = forward_loss_tensor(ctx, tokens, targets);
  return loss.device().is_cpu() ? *loss.data<float>() : loss.to(Device::cpu()).data<float>()[0];
}

Tensor Gpt::forward_loss_tensor(Ctx& ctx, const Tensor& tokens, const Tensor& targets) {
  // A host batch is checked here, where reading it is free. Under batch
  // sequence parallelism each rank holds only its own samples, which are
  // gathered over TP: the kernels check the gathered ids, so that every rank
  // of the group fails alike.
  const bool batch_sp = pc_->sp == SequenceParallel::batch && pc_->tp_group();
  const bool checked = !batch_sp && tokens.device().is_cpu() && targets.device().is_cpu() &&
                       tokens.dim() == 2 && targets.dim() == 2 && tokens.dtype() == DType::i32 &&
                       targets.dtype() == DType::i32;
  if (checked) {
    check_host_ids(tokens, false);
    check_host_ids(targets, true);
  }
  Tensor x = forward_hidden(ctx, tokens, checked);
  Tensor t = tokens_for_group(targets);
  if (pc_->token_layout() == parallel::TokenLayout::sequence_major) t = swap01(pc_->exec, t);
  return head_.forward_loss_tensor(ctx, x, t, kernels::kIgnoreIndex, checked);
}

void Gpt::backward_loss(Ctx& ctx, float dloss, const GradsReady& ready) {
  auto done = [&](Module& m) {
    if (ready) ready(m.parameters());
  };
  // The auxiliary losses join the objective with the LM loss's scale.
  for (auto& l : layers_) {
    if (MoeMLP* m = l->moe()) m->router().set_loss_scale(ctx, dloss);
  }
  Tensor dx = head_.backward_loss(ctx, dloss);
  if (!cfg_.tied_head) done(head_);
  dx = ln_f_.backward(ctx, dx);
  done(ln_f_);
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it) {
    dx = (*it)->backward(ctx, dx);
    done(**it);
  }
  // A tied head's gradient went into wte above: it is final only now.
  embedding_.backward(ctx, dx);
  done(embedding_);
}

float Gpt::aux_loss(Ctx& ctx) {
  float sum = 0.0f;
  for (auto& l : layers_) {
    if (MoeMLP* m = l->moe()) sum += m->router().weighted_aux_loss(ctx);
  }
  return sum;
}

std::vector<std::vector<int64_t>> Gpt::expert_load() {
  std::vector<std::vector<int64_t>> out;
  for (auto& l : layers_) {
    if (MoeMLP* m = l->moe()) out.push_back(m->router().last_counts());
  }
  return out;
}

int64_t Gpt::num_parameters_global() {
  int64_t n = 0;
  for (Parameter* p : parameters()) n += p->spec.global_shape.numel();
  return n;
}

}  // namespace weft::nn
