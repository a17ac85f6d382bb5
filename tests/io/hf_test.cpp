// Hugging Face model directories: export as save_pretrained writes them
// (sharded or not, config, generation config, byte-level tokenizer), reading
// them back (and refusing damaged indexes), config.json fields that change
// the math, and a shorter context keeping the first positions.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "contexts.h"
#include "testing.h"
#include "weft/comm/grid.h"
#include "weft/comm/local.h"
#include "weft/core/threads.h"
#include "weft/io/checkpoint.h"
#include "weft/io/hf_export.h"
#include "weft/io/hf_files.h"
#include "weft/nn/gpt.h"
#include "weft/optim/adamw.h"

namespace weft::io {
namespace {

namespace fs = std::filesystem;
using weft::testing::TempDir;

// Models are built with seed 5 unless a test says otherwise.
nn::GptConfig config(int64_t vocab = 61, int64_t seq = 8) {
  nn::GptConfig c;
  c.vocab = vocab;
  c.seq = seq;
  c.layers = 2;
  c.width = 16;
  c.heads = 4;
  return c;
}

// A checkpoint of a freshly initialized model (TP 1) at `dir`.
void save_model(const std::string& dir, const nn::GptConfig& cfg) {
  auto world = comm::local_world_of_one();
  comm::Grid grid(*world, "tp-dp", {{"tp", 1}});
  nn::Gpt model(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 5), cfg);
  io::TrainState state;
  state.config = io::model_shape_json(cfg);
  io::save_checkpoint(dir, *world, grid, model, nullptr, state);
}

using weft::testing::error_of;

std::set<std::string> listing(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

io::Json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return io::parse_json(text.str(), path);
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

// The parameters of a model loaded from `path` equal those of `source`.
void expect_loads_as(const std::string& path, const nn::GptConfig& source_cfg) {
  nn::Gpt source(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 5), source_cfg);
  nn::Gpt loaded(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 6), source_cfg);
  io::load_hf(path, loaded);
  for (size_t i = 0; i < source.parameters().size(); ++i) {
    EXPECT_EQ(loaded.parameters()[i]->value.to_vector(), source.parameters()[i]->value.to_vector())
        << source.parameters()[i]->name;
  }
}

TEST(HfDirectory, ExportWritesWhatSavePretrainedWrites) {
  TempDir tmp;
  const nn::GptConfig cfg = config();
  save_model(tmp.path("ck"), cfg);
  // The directory (and its parent) need not exist.
  const std::string out = tmp.path("exports/model");
  io::export_hf(tmp.path("ck"), out);
  EXPECT_EQ(listing(out),
            (std::set<std::string>{"config.json", "generation_config.json", "model.safetensors"}));
  const io::Json c = read_json(out + "/config.json");
  EXPECT_EQ(c.at("n_embd").as_int(), 16);
  EXPECT_EQ(c.at("n_head").as_int(), 4);
  EXPECT_EQ(c.at("vocab_size").as_int(), 61);
  EXPECT_EQ(read_json(out + "/generation_config.json").at("eos_token_id").as_int(), 60);
  EXPECT_TRUE(io::is_hf_directory(out));
  EXPECT_FALSE(io::is_hf_directory(tmp.path("ck")));
  EXPECT_EQ(io::hf_config(out), io::model_shape_json(cfg));
  expect_loads_as(out, cfg);
  // A config.json of another shape in the directory is refused by name.
  io::Json wrong = c;
  wrong["n_layer"] = 3;
  write_text(out + "/config.json", wrong.dump());
  EXPECT_NE(error_of([&] { io::hf_config(out); }).find("n_layer 3"), std::string::npos);
}

TEST(HfDirectory, SingleFileExportTouchesNothingElse) {
  TempDir tmp;
  save_model(tmp.path("ck"), config());
  fs::create_directory(tmp.path("out"));
  write_text(tmp.path("out/config.json"), "mine");
  io::export_hf(tmp.path("ck"), tmp.path("out/weights.safetensors"));
  EXPECT_EQ(listing(tmp.path("out")),
            (std::set<std::string>{"config.json", "weights.safetensors"}));
  std::ifstream in(tmp.path("out/config.json"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "mine");
}

TEST(HfDirectory, ShardsAboveTheSizeAndReadsThemBack) {
  TempDir tmp;
  const nn::GptConfig cfg = config();
  save_model(tmp.path("ck"), cfg);
  const std::string out = tmp.path("sharded");
  io::export_hf(tmp.path("ck"), out, {.max_shard_bytes = 4096});
  const io::Json index = read_json(out + "/model.safetensors.index.json");
  std::set<std::string> shards;
  int64_t total = 0;
  for (const auto& [name, shard] : index.at("weight_map").as_object()) {
    shards.insert(shard.as_string());
    total += io::SafetensorsFile(out + "/" + shard.as_string()).info(name).nbytes();
  }
  EXPECT_GT(shards.size(), 2u);
  EXPECT_EQ(index.at("metadata").at("total_size").as_int(), total);
  char last[64];
  std::snprintf(last, sizeof last, "model-%05zu-of-%05zu.safetensors", shards.size(),
                shards.size());
  EXPECT_TRUE(shards.count(last)) << last;
  EXPECT_FALSE(fs::exists(out + "/model.safetensors"));
  EXPECT_EQ(io::hf_config(out), io::model_shape_json(cfg));
  expect_loads_as(out, cfg);

  // Exported again unsharded: the old shards and index go, the rest stays.
  write_text(out + "/README.md", "notes");
  io::export_hf(tmp.path("ck"), out);
  EXPECT_EQ(listing(out), (std::set<std::string>{"README.md", "config.json",
                                                 "generation_config.json", "model.safetensors"}));
  expect_loads_as(out, cfg);
}

TEST(HfDirectory, DamagedIndexesAreRefusedByName) {
  TempDir tmp;
  save_model(tmp.path("ck"), config());
  const std::string out = tmp.path("m");
  io::export_hf(tmp.path("ck"), out, {.max_shard_bytes = 4096});
  const std::string index_path = out + "/model.safetensors.index.json";
  const io::Json good = read_json(index_path);
  auto with_shard_of = [&](const std::string& tensor, const std::string& shard) {
    io::Json j = good;
    j["weight_map"][tensor] = shard;
    write_text(index_path, j.dump());
    return error_of([&] { io::HfModelFiles f(out); });
  };
  EXPECT_NE(with_shard_of("transformer.wte.weight", "../ck/model-rank0.safetensors")
                .find("is not a file name in its directory"),
            std::string::npos);
  EXPECT_NE(with_shard_of("transformer.wte.weight", "model-99999-of-99999.safetensors")
                .find("which is missing"),
            std::string::npos);
  const std::string other_shard = good.at("weight_map").at("transformer.ln_f.bias").as_string();
  EXPECT_NE(with_shard_of("transformer.wte.weight", other_shard).find("does not hold it"),
            std::string::npos);
  write_text(index_path, "{\"metadata\": {}}");
  EXPECT_NE(error_of([&] { io::HfModelFiles f(out); }).find("no \"weight_map\""),
            std::string::npos);
  fs::remove(index_path);
  EXPECT_NE(error_of([&] { io::HfModelFiles f(out); }).find("without model.safetensors"),
            std::string::npos);
}

TEST(HfDirectory, ConfigFieldsThatChangeTheMathAreRefused) {
  TempDir tmp;
  save_model(tmp.path("ck"), config());
  const std::string out = tmp.path("m");
  io::export_hf(tmp.path("ck"), out);
  const io::Json good = read_json(out + "/config.json");
  auto refused = [&](const char* key, io::Json value) {
    io::Json c = good;
    c[key] = std::move(value);
    write_text(out + "/config.json", c.dump());
    return error_of([&] { io::hf_config(out); });
  };
  EXPECT_NE(refused("activation_function", "relu").find("activation_function \"relu\""),
            std::string::npos);
  EXPECT_NE(refused("layer_norm_epsilon", 1e-2).find("layer_norm_epsilon 0.01"), std::string::npos);
  EXPECT_NE(refused("scale_attn_weights", false).find("scale_attn_weights false"),
            std::string::npos);
  EXPECT_NE(
      refused("scale_attn_by_inverse_layer_idx", true).find("scale_attn_by_inverse_layer_idx true"),
      std::string::npos);
  EXPECT_NE(refused("tie_word_embeddings", false).find("tie_word_embeddings false"),
            std::string::npos);
  EXPECT_NE(refused("n_inner", 32).find("n_inner 32"), std::string::npos);
  // The tanh GELU under its other name is the same math.
  EXPECT_EQ(refused("activation_function", "gelu_pytorch_tanh"), "");
}

TEST(HfDirectory, AShorterContextKeepsTheFirstPositions) {
  TempDir tmp;
  const nn::GptConfig long_cfg = config(61, 16);
  save_model(tmp.path("ck"), long_cfg);
  io::export_hf(tmp.path("ck"), tmp.path("m"));
  nn::Gpt source(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 5), long_cfg);
  nn::Gpt shorter(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 9), config(61, 8));
  io::load_hf(tmp.path("m"), shorter);
  for (size_t i = 0; i < source.parameters().size(); ++i) {
    const nn::Parameter& p = *source.parameters()[i];
    Tensor want = p.name == "wpe.weight" ? p.value.narrow(0, 8) : p.value;
    EXPECT_EQ(shorter.parameters()[i]->value.to_vector(), want.to_vector()) << p.name;
  }
  nn::Gpt longer(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 5), config(61, 32));
  EXPECT_NE(error_of([&] {
              io::load_hf(tmp.path("m"), longer);
            }).find("fewer than this model's --seq 32"),
            std::string::npos);
}

// --init from a weft checkpoint at a shorter --seq: the weights load, wpe
// keeps its first positions; resuming (with the optimizer) still needs the
// same shape.
TEST(HfDirectory, WeftCheckpointsInitAShorterContextToo) {
  TempDir tmp;
  const nn::GptConfig long_cfg = config(61, 16);
  save_model(tmp.path("ck"), long_cfg);
  nn::Gpt source(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 5), long_cfg);
  auto world = comm::local_world_of_one();
  comm::Grid grid(*world, "tp-dp", {{"tp", 1}});
  nn::Gpt shorter(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, 9), config(61, 8));
  io::load_checkpoint(tmp.path("ck"), *world, grid, shorter, nullptr);
  for (size_t i = 0; i < source.parameters().size(); ++i) {
    const nn::Parameter& p = *source.parameters()[i];
    Tensor want = p.name == "wpe.weight" ? p.value.narrow(0, 8) : p.value;
    EXPECT_EQ(shorter.parameters()[i]->value.to_vector(), want.to_vector()) << p.name;
  }
  optim::AdamW opt(shorter.parameters(), {});
  EXPECT_NE(error_of([&] {
              io::load_checkpoint(tmp.path("ck"), *world, grid, shorter, &opt);
            }).find("holds a model with seq 16, but this model has seq 8"),
            std::string::npos);
}

TEST(HfDirectory, ByteLevelModelsGetTheirTokenizer) {
  TempDir tmp;
  save_model(tmp.path("ck"), config(256));
  io::export_hf(tmp.path("ck"), tmp.path("m"));
  const io::Json tok = read_json(tmp.path("m/tokenizer.json"));
  const io::Json& vocab = tok.at("model").at("vocab");
  ASSERT_EQ(vocab.as_object().size(), 256u);
  std::set<int64_t> ids;
  for (const auto& [symbol, id] : vocab.as_object()) ids.insert(id.as_int());
  EXPECT_EQ(ids.size(), 256u);
  EXPECT_EQ(*ids.begin(), 0);
  EXPECT_EQ(*ids.rbegin(), 255);
  // GPT-2's alphabet: 'A' is itself, the space is U+0120 'Ġ', byte 0 is U+0100.
  EXPECT_EQ(vocab.at("A").as_int(), 65);
  EXPECT_EQ(vocab.at("\xC4\xA0").as_int(), 32);
  EXPECT_EQ(vocab.at("\xC4\x80").as_int(), 0);
  EXPECT_EQ(read_json(tmp.path("m/tokenizer_config.json")).at("model_max_length").as_int(), 8);
}

}  // namespace
}  // namespace weft::io
