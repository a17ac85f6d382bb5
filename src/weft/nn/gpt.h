// Gpt: the decoder-only transformer with tensor, sequence and data
// parallelism; GPT-2 and Llama-family models are configurations of it.
//
//   tokens (B, T) i32
//   -> VocabParallelEmbedding (wte split by vocabulary over TP [, + wpe])
//   -> layers × TransformerLayer (pre-norm; each runs the next one's ln_1,
//      the last one ln_f, fused with its last residual add)
//   -> ln_f -> LmHead (tied to wte, or its own lm_head.weight)
//   -> vocab-parallel cross-entropy
//
// The architecture is GptConfig's: GPT-2 (LayerNorm, GELU MLP, learned
// positions, biases, head tied to wte) by default; Llama (RMSNorm, SwiGLU,
// rotary positions inside attention, grouped-query attention, no biases, an
// untied head) with the fields below set as gpt_preset("llama-tiny") does.
//
// Every rank of a TP group passes the same tokens and targets, except under
// batch sequence parallelism ("TP across DP ranks"), where each rank passes
// its own samples (B/tp of the group's batch): the model all-gathers them
// first (int32, cheap) and the embedding reduce-scatters activations back to
// their owners, so every activation a rank holds is its own samples'.
//
// Parameter names follow Hugging Face's GPT-2 without the "transformer."
// prefix (wte.weight, wpe.weight, h.N.ln_1.weight, ..., ln_f.bias, and
// lm_head.weight when untied), for every architecture; the io/ code maps them
// to and from Hugging Face's GPT-2 and Llama layouts.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "weft/nn/embedding.h"
#include "weft/nn/norm.h"
#include "weft/nn/partition.h"
#include "weft/nn/transformer_layer.h"

namespace weft::nn {

// Where positions enter: a learned table added to the embedding (wpe,
// GPT-2) or rotations of the queries and keys inside attention (Llama).
enum class PositionKind { learned, rotary };
const char* position_kind_name(PositionKind k);  // "learned", "rotary"
PositionKind parse_position_kind(const std::string& name);

struct GptConfig {
  int64_t vocab = 256;
  int64_t seq = 128;  // context length (rows of wpe, or of the rotary table)
  int64_t layers = 4;
  int64_t width = 128;
  int64_t heads = 4;
  float dropout = 0.0f;  // attention-probability and residual dropout
  int64_t vocab_pad = kDefaultVocabPad;
  float init_std = 0.02f;
  // Which attention and MLP blocks are tensor-parallel (partition.h).
  PartitionPlan plan{};
  // The architecture: GPT-2's by default.
  NormKind norm = NormKind::layer;
  float norm_eps = 1e-5f;
  MlpKind mlp = MlpKind::gelu;
  int64_t hidden = 0;  // the MLP's hidden size; 0: 4·width
  PositionKind positions = PositionKind::learned;
  double rope_theta = 10000.0;  // rotary positions' base
  int64_t kv_heads = 0;         // key/value heads (grouped-query attention); 0: heads
  bool bias = true;             // biases in the Linear layers and LayerNorms
  bool tied_head = true;        // the LM head reads wte; otherwise lm_head.weight
  // Mixture of experts (nn/moe_mlp.h): MoE MLPs of moe_experts experts (0:
  // dense) in every moe_every-th layer (layer i when (i + 1) % moe_every is
  // 0; 1: all), each token to moe_top_k of them; capacity factor 0 is
  // dropless. The auxiliary losses join the training loss with these
  // weights (Mixtral's 0.01; a z-loss weight of 0.001 is ST-MoE's when wanted).
  int64_t moe_experts = 0;
  int64_t moe_top_k = 2;
  int64_t moe_every = 1;
  float moe_capacity_factor = 0.0f;
  float moe_aux_coef = 0.01f;
  float moe_z_coef = 0.0f;
  // Activation recomputation (recompute.h) in the first recompute_layers
  // layers (0: all). Not architecture: checkpoints do not keep it.
  Recompute recompute = Recompute::none;
  int64_t recompute_layers = 0;

  int64_t kv_head_count() const { return kv_heads ? kv_heads : heads; }
  int64_t mlp_hidden() const { return hidden ? hidden : 4 * width; }
  bool moe_layer(int64_t i) const { return moe_experts > 0 && (i + 1) % moe_every == 0; }
};

// "tiny" (4 layers, width 128, 4 heads, context 128, byte vocabulary: trains
// visibly in minutes on two cores), "gpt2-124m" (12 layers, width 768, 12
// heads, context 1024, vocabulary 50257), "gpt2-350m" (GPT-2 medium: 24
// layers, width 1024, 16 heads), "llama-tiny" (tiny's size as a
// Llama: RMSNorm, SwiGLU with hidden 352, rotary positions, 8 heads sharing 4
// KV heads, no biases, untied head) and "llama-1b" (TinyLlama-1.1B's shape:
// 22 layers, width 2048, 32 heads, 4 KV heads, MLP 5632, vocabulary 32000,
// context 2048), "llama3-405b" (Llama 3 405B's shape: 126 layers, width
// 16384, 128 heads, 8 KV heads, MLP 53248, vocabulary 128256, context 8192;
// for `weft plan`, far beyond one machine), "moe-tiny" (llama-tiny with 4 experts, top-2, in every
// layer: a Mixtral at tiny's size). Throws for other names.
GptConfig gpt_preset(const std::string& name);
// The preset names, for help texts and errors.
const std::vector<std::string>& gpt_preset_names();
// Checks the shape against itself and the tensor-parallel size `tp` (what a
// model of this shape needs to be split over tp ranks); the error names the
// fields to change (width, heads, vocab_pad, dropout, ..., and tp).
void validate(const GptConfig& cfg, int tp = 1);

// The part of the model one pipeline stage holds (parallel/pipeline/):
// layers [first_layer, end_layer) (-1: to the last), named by their place in
// the whole model (h.3 stays h.3); the embedding on the first stage; the
// final norm, the head and the loss on the last. A tied head on a last stage
// that is not also the first reads its own copy of wte, initialized alike;
// its gradient is summed with the first stage's over the embedding group
// (the trainer does), and the copy's ShardSpec is replicated over "pp" so
// that norms and checkpoints count the first stage's alone.
struct GptStage {
  int64_t first_layer = 0;
  int64_t end_layer = -1;
  bool first = true;
  bool last = true;
};

class Gpt : public Module {
 public:
  // The parallel context (tp, sp, precision, seed, ...) is shared by every module.
  Gpt(ContextPtr context, GptConfig cfg, GptStage stage = {});

  // tokens (B, T) -> logits (B, T, Vp/tp): this rank's vocabulary slice for
  // the TP group's whole batch (generation and evaluation), batch-major
  // whatever the residual stream's layout.
  Tensor forward(Ctx& ctx, const Tensor& tokens) override;
  // dlogits -> nothing (tokens are not differentiable); gradients accumulate.
  Tensor backward(Ctx& ctx, const Tensor& dlogits) override;

  // Generation (infer/; forward only: what the sub-modules keep for a
  // backward stays in ctx and goes with it; no sequence parallelism; every
  // rank of the TP group passes the same tokens): tokens
  // (B, S), entry b's at positions caches[i].start[b] + s (the same starts
  // for every layer i), whose earlier positions' keys and values caches[i]
  // holds for layer i; the new rows' keys and values are written there.
  // -> logits (B, Vp/tp): this rank's vocabulary slice at new row rows[b] of
  // each entry (the head runs on those rows only).
  Tensor forward_cached(Ctx& ctx, const Tensor& tokens, std::span<const KvCacheView> caches,
                        std::span<const int64_t> rows);

  // tokens, targets (B, T) [batch SP: this rank's samples] -> the mean loss
  // over the TP group's tokens (the same on every rank of the group).
  // The MoE layers' auxiliary losses are not in it: see aux_loss.
  float forward_loss(Ctx& ctx, const Tensor& tokens, const Tensor& targets);
  // The same, left where the model runs: f32 {mean loss, scored rows} on the
  // model's device. Host batches (the data loader's) have their ids checked
  // on the host first, so that a GPU reads nothing back during the step.
  Tensor forward_loss_tensor(Ctx& ctx, const Tensor& tokens, const Tensor& targets);
  // The weighted auxiliary losses of ctx's forward (the MoE routers' load
  // balance and z losses; 0 for a dense model): backward_loss trains on
  // the language-model loss plus this, scaled alike.
  float aux_loss(Ctx& ctx);
  // Tokens each expert processed in the latest forward, per MoE layer.
  std::vector<std::vector<int64_t>> expert_load();
  // Backward of dloss·loss. `ready` is called with each module's parameters
  // as soon as their gradients are final (data-parallel sync overlaps the
  // rest of backward).
  using GradsReady = std::function<void(const std::vector<Parameter*>&)>;
  void backward_loss(Ctx& ctx, float dloss = 1.0f, const GradsReady& ready = {});

  // A pipeline stage's passes (GptStage). stage_forward: `input` is the
  // tokens (B, T) on the first stage, else the previous stage's output (the
  // residual stream, stream_shape()); returns this stage's output, or on the
  // last stage forward_loss_tensor()'s {mean loss, scored rows} of
  // `targets`. stage_backward: `dy` is the gradient of the stage's output
  // (ignored on the last stage, which starts from its loss scaled by dloss);
  // returns the gradient of its input (empty on the first stage).
  // `nonfinite` (a diagnosis, slow): when given and still empty, set to
  // where this stage's activations first hold a value that is not finite
  // ("the embedding", "layer h.3", "the head").
  Tensor stage_forward(Ctx& ctx, const Tensor& input, const Tensor& targets,
                       std::string* nonfinite = nullptr);
  Tensor stage_backward(Ctx& ctx, const Tensor& dy, float dloss, const GradsReady& ready = {});
  // The residual stream between stages for `batch` sequences of `seq` tokens
  // passed by this rank, and its dtype.
  Shape stream_shape(int64_t batch, int64_t seq) const;
  DType stream_dtype() const;
  const GptStage& stage() const { return stage_; }
  // True on the last stage of a split model with a tied head: wte here is a copy.
  bool holds_tied_copy() const { return cfg_.tied_head && stage_.last && !stage_.first; }

  // The parameters the model's other pipeline stages hold (checkpoints hold
  // them; loading on this stage skips them): set by whoever knows the
  // stages (the trainer gathers them over the pipeline group).
  void set_parameters_on_other_stages(std::vector<std::string> names) {
    other_stages_ = std::move(names);
  }
  std::vector<std::string> own_parameters_elsewhere() override { return other_stages_; }

  std::vector<Module*> children() override;
  const GptConfig& config() const { return cfg_; }
  const ContextPtr& context() const { return pc_; }
  VocabParallelEmbedding& embedding() { return embedding_; }
  TransformerLayer& layer(int64_t i) { return *layers_.at(static_cast<size_t>(i)); }
  int64_t num_parameters_global();

 private:
  Tensor tokens_for_group(const Tensor& tokens) const;
  Tensor forward_hidden(Ctx& ctx, const Tensor& tokens, bool ids_checked = false);
  // Throws weft::Error naming the first id of a host batch outside the
  // vocabulary (targets may also be the ignore index).
  void check_host_ids(const Tensor& ids, bool targets) const;

  ContextPtr pc_;
  GptConfig cfg_;
  GptStage stage_;
  VocabParallelEmbedding embedding_;
  std::vector<std::unique_ptr<TransformerLayer>> layers_;
  Norm ln_f_;
  LmHead head_;
  std::vector<std::string> other_stages_;
};

}  // namespace weft::nn
