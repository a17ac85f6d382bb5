// Real files for the targets that fuzz one file among others: a tiny GPT
// checkpoint saved at TP 2 (two model and optimizer shards, index.json,
// rank0.json, rank1.json) and its Hugging Face exports, and a tiny Llama's
// (GPT-2 and Llama files are read by different code). The seed corpus
// (make_corpus.cpp) is taken from the same files, so seeds describe the
// shards the targets load.
#pragma once

#include <filesystem>
#include <string>

#include "weft/comm/grid.h"
#include "weft/comm/local.h"
#include "weft/core/threads.h"
#include "weft/io/checkpoint.h"
#include "weft/io/hf_export.h"
#include "weft/nn/gpt.h"
#include "weft/optim/adamw.h"
#include "weft/train/config.h"

namespace weft::fuzz {

// 1 layer, width 8, 2 heads, context 8, vocabulary 20.
inline train::TrainConfig tiny_config() {
  train::TrainConfig cfg;
  cfg.preset = "tiny";
  cfg.model.layers = 1;
  cfg.model.width = 8;
  cfg.model.heads = 2;
  cfg.model.seq = 8;
  cfg.model.vocab = 20;
  cfg.tp = 2;
  cfg.seed = 5;
  return cfg;
}

// The tiny model as a Llama: 4 query heads over 2 KV heads (width 8), SwiGLU
// hidden 16, untied head.
inline train::TrainConfig tiny_llama_config() {
  train::TrainConfig cfg = tiny_config();
  cfg.preset = "llama-tiny";
  const nn::GptConfig sizes = cfg.model;
  cfg.model = nn::gpt_preset("llama-tiny");
  cfg.model.layers = sizes.layers;
  cfg.model.width = sizes.width;
  cfg.model.seq = sizes.seq;
  cfg.model.vocab = sizes.vocab;
  cfg.model.heads = 4;
  cfg.model.kv_heads = 2;
  cfg.model.hidden = 16;
  return cfg;
}

// Saves the tiny model (or `cfg`), freshly initialized, with AdamW state
// after 3 steps.
inline void save_tiny_checkpoint(const std::string& dir,
                                 const train::TrainConfig& cfg = tiny_config()) {
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    comm::Grid grid(world, "tp-dp", {{"tp", 2}});
    nn::Gpt model(train::model_context(cfg, grid.group_ptr("tp")), train::model_config(cfg));
    optim::AdamW opt(model.parameters(), {});
    opt.set_steps_taken(3);
    parallel::RngTracker rng(cfg.seed, grid.rank_in("tp"));
    rng.take(10);
    io::TrainState state{
        .step = 3, .data_seed = cfg.seed, .rng = rng.state(), .config = cfg.to_json()};
    io::save_checkpoint(dir, world, grid, model, &opt, state);
  });
}

// The checkpoint of save_tiny_checkpoint exported as Hugging Face files: a
// model directory DIR/model as save_pretrained writes it, sharded (shards of
// at most 1 KiB, model.safetensors.index.json, config.json), and the lone
// file DIR/file/model.safetensors.
inline void save_tiny_hf(const std::string& checkpoint_dir, const std::string& dir) {
  io::export_hf(checkpoint_dir, dir + "/model", {.max_shard_bytes = 1024});
  std::filesystem::create_directories(dir + "/file");
  io::export_hf(checkpoint_dir, dir + "/file/model.safetensors");
}

}  // namespace weft::fuzz
