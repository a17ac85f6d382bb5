// Hugging Face Llama files (LlamaForCausalLM): the names, layouts and
// config.json of a weft Llama model; hf_export.h's public functions dispatch
// here for a Llama checkpoint or Llama files.
//
// Names and layouts (C = width, H heads, Hkv KV heads, D = C/H, n_rep =
// H/Hkv, F = MLP hidden, V = vocabulary, N = layer). Every weight is
// (out, in) as torch.nn.Linear stores it: nothing is transposed.
//   weft                             Hugging Face
//   wte.weight (Vp, C)               model.embed_tokens.weight (V, C): padding rows dropped
//   h.N.ln_1.weight                  model.layers.N.input_layernorm.weight
//   h.N.attn.qkv.weight              model.layers.N.self_attn.{q,k,v}_proj.weight
//     ((H+2Hkv)·D, C) = [q | k | v]    (H·D, C), (Hkv·D, C), (Hkv·D, C)
//   h.N.attn.proj.weight (C, H·D)    model.layers.N.self_attn.o_proj.weight
//   h.N.ln_2.weight                  model.layers.N.post_attention_layernorm.weight
//   h.N.mlp.fc1.weight (2F, C)       model.layers.N.mlp.{gate,up}_proj.weight (F, C) each
//     = [gate | up]
//   h.N.mlp.fc2.weight (C, F)        model.layers.N.mlp.down_proj.weight
//   ln_f.weight                      model.norm.weight
//   lm_head.weight (Vp, C)           lm_head.weight (V, C); a tied head has none
//                                    (tie_word_embeddings true)
// A MoE model (every layer MoE, dropless, top-2) is a Mixtral
// (MixtralForCausalLM, model_type "mixtral", num_local_experts,
// num_experts_per_tok); its MLPs are, per layer N and expert e:
//   h.N.mlp.router.weight (E, C)     model.layers.N.block_sparse_moe.gate.weight
//   h.N.mlp.fc1.experts.e.weight     model.layers.N.block_sparse_moe.experts.e.{w1,w3}.weight
//     (2F, C) = [gate | up]            (F, C) each
//   h.N.mlp.fc2.experts.e.weight     model.layers.N.block_sparse_moe.experts.e.w2.weight
// Mixtral's gates (the softmax of the two chosen logits, renormalized) are
// weft's top-2 gates; weft's top-1 gate (Switch's) is not Mixtral's, and is
// refused both ways.
// Query heads: weft's attention kernel has query head p use KV head p mod
// Hkv, Hugging Face's has head h use KV head h / n_rep. So weft's q head
// p = b·Hkv + g is Hugging Face's head h = g·n_rep + b: q_proj's row blocks
// of D rows and o_proj's column blocks are permuted accordingly; k and v
// heads are in the same order in both. Rotary positions are Hugging Face's
// rotate-half in both, so no rows within a head move.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/io/checkpoint_format.h"
#include "weft/io/hf_files.h"
#include "weft/io/json.h"
#include "weft/nn/module.h"

namespace weft::io {

// Which Hugging Face architecture a weft model shape (model_shape_json; an
// old checkpoint's shape without architecture keys is GPT-2's) exports as.
// A shape that is neither GPT-2 nor Llama (rotary positions with LayerNorm,
// a Llama with biases, ...) is an error naming the field, for `what`.
enum class HfArchitecture { gpt2, llama };
HfArchitecture hf_architecture_of(const Json& shape, const std::string& what);

// The Llama tensors of checkpoint `ck` (a Llama shape) with Hugging Face's
// names and layouts, in layer order.
std::vector<NamedTensor> llama_hf_tensors(const CheckpointReader& ck, const Json& shape);
// LlamaConfig for the model shape, as save_pretrained writes it.
Json llama_config(const Json& shape);

// Whether the files hold a Llama: config.json's model_type ("llama" or
// "gpt2"; anything else is refused by name), else whether there is a
// model.embed_tokens.weight. `config` is the parsed config.json (null when
// there is none).
bool is_llama_files(const HfModelFiles& f, const Json& config);
// The model shape of Llama files (all of model_shape_json's keys), from
// config.json, else from the file's "weft.model" metadata. Config fields weft
// does not compute (rope_scaling, attention_bias, mlp_bias, hidden_act other
// than silu, sliding_window, a head_dim other than hidden_size /
// num_attention_heads, pretraining_tp other than 1) are errors naming them.
Json llama_shape(const HfModelFiles& f, const Json& config);
// Loads Llama files into `model` (a Gpt of the files' shape, any layout).
void load_llama_hf(const HfModelFiles& f, nn::Module& model, bool allow_nonfinite);

// The head permutations of the header, on f32 matrices: q_proj's row blocks
// of `head_dim` rows (weft order <-> Hugging Face order), and o_proj's column
// blocks.
Tensor llama_q_to_hf(const Tensor& q, int64_t heads, int64_t kv_heads);
Tensor llama_q_from_hf(const Tensor& q, int64_t heads, int64_t kv_heads);
Tensor llama_o_to_hf(const Tensor& o, int64_t heads, int64_t kv_heads);
Tensor llama_o_from_hf(const Tensor& o, int64_t heads, int64_t kv_heads);

}  // namespace weft::io
