// Hugging Face model files: GPT-2 (GPT2LMHeadModel, here) and Llama
// (LlamaForCausalLM, hf_llama.h): export_hf, load_hf, hf_config and import_hf
// dispatch on the architecture (the checkpoint's model shape; the files'
// config.json model_type, else their tensor names).
//
// GPT-2's names and layouts follow.
//
// Names and layouts (C = width, V = vocabulary, N = layer):
//   weft                       Hugging Face                          stored as
//   wte.weight (Vp, C)         transformer.wte.weight                (V, C): padding rows dropped
//   wpe.weight                 transformer.wpe.weight                (seq, C)
//   h.N.ln_1.weight / .bias    transformer.h.N.ln_1.weight / .bias   (C)
//   h.N.attn.qkv.weight (3C,C) transformer.h.N.attn.c_attn.weight    (C, 3C): transposed (Conv1D)
//   h.N.attn.qkv.bias          transformer.h.N.attn.c_attn.bias      (3C)
//   h.N.attn.proj.weight       transformer.h.N.attn.c_proj.weight    (C, C): transposed
//   h.N.ln_2.*                 transformer.h.N.ln_2.*
//   h.N.mlp.fc1.weight (4C,C)  transformer.h.N.mlp.c_fc.weight       (C, 4C): transposed
//   h.N.mlp.fc2.weight (C,4C)  transformer.h.N.mlp.c_proj.weight     (4C, C): transposed
//   ln_f.*                     transformer.ln_f.*
// The fused qkv rows [q | k | v] (head h at rows h·D.. of each part) are
// exactly c_attn's columns. There is no lm_head.weight: GPT2LMHeadModel ties
// it to wte, and transformers' own safetensors files omit it. The file's
// metadata has "format": "pt" (from_pretrained requires it) and "weft.model"
// (the model shape as JSON).
//
// Reading accepts names with or without the "transformer." prefix (the
// original gpt2 files have none), ignores the attention-mask buffers
// (attn.bias, attn.masked_bias) and accepts an lm_head.weight only when it
// equals wte (weft's head is tied).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/io/hf_files.h"
#include "weft/io/json.h"
#include "weft/nn/module.h"

namespace weft::io {

// The Hugging Face name of a weft GPT parameter ("h.0.attn.qkv.weight" ->
// "transformer.h.0.attn.c_attn.weight"); a weft::Error for other names.
std::string hf_name(const std::string& weft_name);
// Whether Hugging Face stores the parameter transposed (the Conv1D weights).
bool hf_transposed(const std::string& weft_name);

// Gathers checkpoint DIR (saved at any layout) into Hugging Face GPT-2 files,
// or Llama files for a Llama checkpoint (config.json a LlamaConfig; see
// hf_llama.h). A shape that is neither (hf_architecture_of) is refused.
// `out` ending in .safetensors: that one file, nothing else. Otherwise `out`
// is a model directory as save_pretrained writes it (see hf_files.h):
// model.safetensors (sharded with an index above options.max_shard_bytes),
// config.json (GPT2Config: n_embd, n_layer, n_head, n_positions, vocab_size,
// gelu_new, layer_norm_epsilon 1e-5, tied embeddings), generation_config.json
// and, for byte-level models (vocabulary 256), the tokenizer files, so that
// from_pretrained(out) and pipeline("text-generation", model=out) work.
// Returns the paths written.
std::vector<std::string> export_hf(const std::string& checkpoint_dir, const std::string& out,
                                   const HfDirectoryOptions& options = {});

// Loads a GPT-2 or Llama model (a .safetensors file or a model directory,
// sharded or not) into `model` (a Gpt at any layout): every rank reads the
// full tensors and keeps its slices. The shape, architecture included, must
// be the model's (the error names the field), except that a model with a
// shorter context keeps the first positions of wpe. NaN or infinite values are an error naming the
// tensor, unless allow_nonfinite.
void load_hf(const std::string& path, nn::Module& model, bool allow_nonfinite = false);

// The model shape of a GPT-2 or Llama file or directory (every key of
// model_shape_json; a Llama's from config.json or the file's "weft.model"
// metadata, see llama_shape). A GPT-2's: from the tensor shapes, with the heads from config.json
// (in the directory, or next to the file), else from the file's "weft.model" metadata, else width /
// 64 (every GPT-2 size has 64-wide heads; a warning says so). A config.json field that changes the
// math (activation_function, layer_norm_epsilon, scale_attn_weights,
// scale_attn_by_inverse_layer_idx, tie_word_embeddings, add_cross_attention, n_inner) with a value
// weft computes differently is an error naming it; the architecture keys are GPT-2's.
Json hf_config(const std::string& path);

// `weft checkpoint import`: converts a GPT-2 or Llama model into a checkpoint directory
// at TP=1 with step 0 and no optimizer state, so `weft train --resume DIR`
// starts a run from it (the optimizer starts afresh, streams seeded `seed`).
void import_hf(const std::string& file, const std::string& dir, uint64_t seed);

}  // namespace weft::io
