// Hugging Face Llama files: export of a Llama checkpoint as LlamaForCausalLM
// (names, shapes, config.json), loading them back bit-identically at TP 1 and
// TP 2 (grouped-query heads, so the q/o head permutation matters), the
// permutation itself against hand-computed layouts, and the config fields weft
// does not compute refused by name.
#include "weft/io/hf_llama.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "contexts.h"
#include "testing.h"
#include "weft/comm/grid.h"
#include "weft/comm/local.h"
#include "weft/core/threads.h"
#include "weft/io/checkpoint.h"
#include "weft/io/hf_export.h"
#include "weft/io/hf_files.h"
#include "weft/nn/gpt.h"

namespace weft::io {
namespace {

namespace fs = std::filesystem;
using weft::testing::error_of;
using weft::testing::TempDir;

// llama-tiny's architecture at a test's size: 4 query heads sharing 2 KV
// heads (D = 4), SwiGLU hidden 24, an untied head unless `tied`.
nn::GptConfig llama_config(bool tied = false, int64_t vocab = 61) {
  nn::GptConfig c = nn::gpt_preset("llama-tiny");
  c.vocab = vocab;
  c.seq = 8;
  c.layers = 2;
  c.width = 16;
  c.heads = 4;
  c.kv_heads = 2;
  c.hidden = 24;
  c.rope_theta = 500000.0;
  c.tied_head = tied;
  return c;
}

// The model context of the tests (no SP, f32); `tp` null: TP 1.
template <typename Tp = std::nullptr_t>
auto context(uint64_t seed, Tp tp = nullptr) {
  return ctx_of(tp, parallel::SequenceParallel::off, DType::f32, seed);
}

// A checkpoint of a freshly initialized model (TP 1, seed 5) at `dir`.
void save_model(const std::string& dir, const nn::GptConfig& cfg) {
  auto world = comm::local_world_of_one();
  comm::Grid grid(*world, "tp-dp", {{"tp", 1}});
  nn::Gpt model(context(5), cfg);
  io::TrainState state;
  state.config = io::model_shape_json(cfg);
  io::save_checkpoint(dir, *world, grid, model, nullptr, state);
}

Json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_json(text.str(), path);
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

// The parameters of a TP 1 model loaded from `path` equal the source's.
void expect_loads_as(const std::string& path, const nn::GptConfig& cfg) {
  nn::Gpt source(context(5), cfg);
  nn::Gpt loaded(context(6), cfg);
  load_hf(path, loaded);
  ASSERT_EQ(loaded.parameters().size(), source.parameters().size());
  for (size_t i = 0; i < source.parameters().size(); ++i) {
    EXPECT_EQ(loaded.parameters()[i]->value.to_vector(), source.parameters()[i]->value.to_vector())
        << source.parameters()[i]->name;
  }
}

TEST(HfLlama, ExportHasHuggingFacesNamesShapesAndConfig) {
  TempDir tmp;
  const nn::GptConfig cfg = llama_config();
  save_model(tmp.path("ck"), cfg);
  const std::string out = tmp.path("m");
  export_hf(tmp.path("ck"), out);
  std::map<std::string, std::vector<int64_t>> want = {
      {"model.embed_tokens.weight", {61, 16}},
      {"model.norm.weight", {16}},
      {"lm_head.weight", {61, 16}},
  };
  for (int n = 0; n < 2; ++n) {
    const std::string at = "model.layers." + std::to_string(n) + ".";
    want[at + "input_layernorm.weight"] = {16};
    want[at + "post_attention_layernorm.weight"] = {16};
    want[at + "self_attn.q_proj.weight"] = {16, 16};
    want[at + "self_attn.k_proj.weight"] = {8, 16};
    want[at + "self_attn.v_proj.weight"] = {8, 16};
    want[at + "self_attn.o_proj.weight"] = {16, 16};
    want[at + "mlp.gate_proj.weight"] = {24, 16};
    want[at + "mlp.up_proj.weight"] = {24, 16};
    want[at + "mlp.down_proj.weight"] = {16, 24};
  }
  std::map<std::string, std::vector<int64_t>> got;
  HfModelFiles f(out);
  for (const TensorInfo* t : f.tensors()) got[t->name] = t->shape;
  EXPECT_EQ(got, want);

  const Json c = read_json(out + "/config.json");
  EXPECT_EQ(c.at("architectures").at(0), Json("LlamaForCausalLM"));
  EXPECT_EQ(c.at("model_type"), Json("llama"));
  EXPECT_EQ(c.at("num_attention_heads").as_int(), 4);
  EXPECT_EQ(c.at("num_key_value_heads").as_int(), 2);
  EXPECT_EQ(c.at("head_dim").as_int(), 4);
  EXPECT_EQ(c.at("intermediate_size").as_int(), 24);
  EXPECT_EQ(c.at("max_position_embeddings").as_int(), 8);
  EXPECT_EQ(c.at("rms_norm_eps").as_double(), 1e-5);  // the float's shortest decimal
  EXPECT_EQ(c.at("rope_theta").as_double(), 500000.0);
  EXPECT_TRUE(c.at("rope_scaling").is_null());
  EXPECT_EQ(c.at("hidden_act"), Json("silu"));
  EXPECT_EQ(c.at("tie_word_embeddings"), Json(false));
  EXPECT_EQ(c.at("eos_token_id").as_int(), 60);
  EXPECT_EQ(hf_config(out), model_shape_json(cfg));
  expect_loads_as(out, cfg);
}

// A MoE model (every layer, top-2, dropless) is a Mixtral: the router and
// each expert's w1/w3/w2 under Mixtral's names, MixtralConfig's fields, and
// the same parameters read back, from the directory and from one file.
TEST(HfLlama, MoeModelsAreMixtrals) {
  TempDir tmp;
  nn::GptConfig cfg = llama_config();
  cfg.moe_experts = 3;
  cfg.moe_top_k = 2;
  save_model(tmp.path("ck"), cfg);
  const std::string out = tmp.path("m");
  export_hf(tmp.path("ck"), out);
  HfModelFiles f(out);
  const std::string moe = "model.layers.1.block_sparse_moe.";
  EXPECT_EQ(f.info(moe + "gate.weight").shape, std::vector<int64_t>({3, 16}));
  for (const char* w : {"w1", "w3"})
    EXPECT_EQ(f.info(moe + "experts.2." + w + ".weight").shape, std::vector<int64_t>({24, 16}));
  EXPECT_EQ(f.info(moe + "experts.0.w2.weight").shape, std::vector<int64_t>({16, 24}));
  EXPECT_EQ(f.find("model.layers.0.mlp.gate_proj.weight"), nullptr);
  const Json c = read_json(out + "/config.json");
  EXPECT_EQ(c.at("architectures").at(0), Json("MixtralForCausalLM"));
  EXPECT_EQ(c.at("model_type"), Json("mixtral"));
  EXPECT_EQ(c.at("num_local_experts").as_int(), 3);
  EXPECT_EQ(c.at("num_experts_per_tok").as_int(), 2);
  EXPECT_EQ(hf_config(out), model_shape_json(cfg));
  expect_loads_as(out, cfg);
  const std::string file = tmp.path("f/model.safetensors");
  fs::create_directories(tmp.path("f"));
  export_hf(tmp.path("ck"), file);
  expect_loads_as(file, cfg);
  // Top-1 (Switch's gate), MoE in some layers only, or capacity drops: no Mixtral.
  for (auto change : std::vector<std::function<void(nn::GptConfig&)>>{
           [](nn::GptConfig& m) { m.moe_top_k = 1; }, [](nn::GptConfig& m) { m.moe_every = 2; },
           [](nn::GptConfig& m) { m.moe_capacity_factor = 1.25f; }}) {
    nn::GptConfig other = cfg;
    change(other);
    TempDir t;
    save_model(t.path("ck"), other);
    EXPECT_NE(error_of([&] { export_hf(t.path("ck"), t.path("m")); }).find("Mixtral"),
              std::string::npos);
  }
}

TEST(HfLlama, TiedShardedAndSingleFileRoundTrips) {
  TempDir tmp;
  const nn::GptConfig cfg = llama_config(/*tied=*/true, 256);
  save_model(tmp.path("ck"), cfg);
  const std::string dir = tmp.path("m"), file = tmp.path("f/model.safetensors");
  export_hf(tmp.path("ck"), dir, {.max_shard_bytes = 4096});
  EXPECT_TRUE(fs::exists(dir + "/model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(dir + "/tokenizer.json"));  // byte-level: the tokenizer files
  EXPECT_EQ(read_json(dir + "/config.json").at("tie_word_embeddings"), Json(true));
  EXPECT_EQ(HfModelFiles(dir).find("lm_head.weight"), nullptr);
  EXPECT_EQ(hf_config(dir), model_shape_json(cfg));
  expect_loads_as(dir, cfg);
  // One file, no config.json: the shape comes from its weft.model metadata.
  fs::create_directories(tmp.path("f"));
  export_hf(tmp.path("ck"), file);
  EXPECT_EQ(hf_config(file), model_shape_json(cfg));
  expect_loads_as(file, cfg);
}

TEST(HfLlama, LoadsAtTp2BitIdentical) {
  TempDir tmp;
  const nn::GptConfig cfg = llama_config();
  save_model(tmp.path("ck"), cfg);
  export_hf(tmp.path("ck"), tmp.path("m"));
  nn::Gpt source(context(5), cfg);
  std::map<std::string, Tensor> full;
  for (nn::Parameter* p : source.parameters()) full[p->name] = p->value;
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    comm::Grid grid(world, "tp-dp", {{"tp", 2}});
    nn::Gpt model(context(9, grid.group_ptr("tp")), cfg);
    load_hf(tmp.path("m"), model);
    for (nn::Parameter* p : model.parameters()) {
      EXPECT_EQ(p->value.to_vector(), nn::shard_of(p->spec, full.at(p->name)).to_vector())
          << p->name << " on rank " << world.rank();
    }
  });
}

// 4 query heads over 2 KV heads (n_rep 2), D = 2: weft's q head p = b·2 + g
// is Hugging Face's head g·2 + b, so weft's heads (0, 1, 2, 3) are Hugging
// Face's (0, 2, 1, 3), and in both orders the head at each place uses the
// KV head Hugging Face assigns it (h / n_rep).
TEST(HfLlama, QueryAndOutputHeadPermutation) {
  // Row r of weft's q holds 10·(its weft head) + (row within the head).
  std::vector<float> q;
  for (int p = 0; p < 4; ++p) {
    for (int r = 0; r < 2; ++r) q.insert(q.end(), {10.0f * p + r, -(10.0f * p + r)});
  }
  const Tensor weft_q = Tensor::from({8, 2}, q);
  const Tensor hf_q = llama_q_to_hf(weft_q, 4, 2);
  const int weft_head_at[4] = {0, 2, 1, 3};  // Hugging Face head h holds weft head ...
  for (int h = 0; h < 4; ++h) {
    for (int r = 0; r < 2; ++r) {
      const float v = 10.0f * weft_head_at[h] + r;
      EXPECT_EQ(hf_q.to_vector()[static_cast<size_t>((h * 2 + r) * 2)], v) << h;
    }
    // weft head p uses KV head p mod 2; Hugging Face head h uses h / 2.
    EXPECT_EQ(weft_head_at[h] % 2, h / 2);
  }
  EXPECT_EQ(llama_q_from_hf(hf_q, 4, 2).to_vector(), weft_q.to_vector());

  // o_proj (2 rows, 4 heads · D 2 columns): column block p moves as q's row block.
  std::vector<float> o;
  for (int row = 0; row < 2; ++row) {
    for (int p = 0; p < 4; ++p)
      o.insert(o.end(), {100.0f * row + 10 * p, 100.0f * row + 10 * p + 1});
  }
  const Tensor weft_o = Tensor::from({2, 8}, o);
  const std::vector<float> hf_o = llama_o_to_hf(weft_o, 4, 2).to_vector();
  for (int row = 0; row < 2; ++row) {
    for (int h = 0; h < 4; ++h) {
      EXPECT_EQ(hf_o[static_cast<size_t>(row * 8 + h * 2 + 1)],
                100.0f * row + 10 * weft_head_at[h] + 1);
    }
  }
  EXPECT_EQ(llama_o_from_hf(llama_o_to_hf(weft_o, 4, 2), 4, 2).to_vector(), weft_o.to_vector());
  // Without grouping (Hkv = H) nothing moves.
  EXPECT_EQ(llama_q_to_hf(weft_q, 4, 4).to_vector(), weft_q.to_vector());
}

TEST(HfLlama, ConfigFieldsWeftDoesNotComputeAreRefusedByName) {
  TempDir tmp;
  save_model(tmp.path("ck"), llama_config());
  const std::string out = tmp.path("m");
  export_hf(tmp.path("ck"), out);
  const Json good = read_json(out + "/config.json");
  auto refused = [&](const char* key, Json value) {
    Json c = good;
    c[key] = std::move(value);
    write_text(out + "/config.json", c.dump());
    return error_of([&] { hf_config(out); });
  };
  Json scaling = Json::object();
  scaling["rope_type"] = "linear";
  scaling["factor"] = 2.0;
  auto has = [](const std::string& error, const std::string& part) {
    return error.find(part) != std::string::npos;
  };
  EXPECT_TRUE(has(refused("rope_scaling", scaling), "rope_scaling {"));
  EXPECT_TRUE(has(refused("attention_bias", true), "attention_bias true is not supported"));
  EXPECT_TRUE(has(refused("mlp_bias", true), "mlp_bias true is not supported"));
  EXPECT_TRUE(has(refused("hidden_act", "gelu"), "hidden_act \"gelu\" is not supported"));
  EXPECT_TRUE(has(refused("sliding_window", 4), "sliding_window 4 is not supported"));
  EXPECT_TRUE(has(refused("head_dim", 8), "head_dim 8 is not supported"));
  EXPECT_TRUE(has(refused("pretraining_tp", 2), "pretraining_tp 2 is not supported"));
  EXPECT_TRUE(has(refused("model_type", "mistral"), "model_type \"mistral\" is not supported"));
  // The values weft computes are accepted, and the shape follows the config.
  EXPECT_EQ(refused("sliding_window", nullptr), "");
  EXPECT_EQ(refused("attention_bias", false), "");
  EXPECT_EQ(hf_config(out).at("rope_theta").as_double(), 500000.0);
  // transformers 5 writes rope_theta and the rope type in rope_parameters.
  Json rope = Json::object();
  rope["rope_type"] = "default";
  rope["rope_theta"] = 250000.0;
  EXPECT_EQ(refused("rope_parameters", rope), "");
  EXPECT_EQ(hf_config(out).at("rope_theta").as_double(), 500000.0);  // the top-level one wins
  Json c = Json::object();
  for (const auto& [key, value] : good.as_object()) {
    if (key != "rope_theta") c[key] = value;
  }
  c["rope_parameters"] = rope;
  write_text(out + "/config.json", c.dump());
  EXPECT_EQ(hf_config(out).at("rope_theta").as_double(), 250000.0);
  rope["rope_type"] = "llama3";
  EXPECT_TRUE(has(refused("rope_parameters", rope), "rope_parameters.rope_type \"llama3\""));
  // A model of another shape is refused naming the field.
  nn::Gpt other(context(5), llama_config(/*tied=*/true));
  write_text(out + "/config.json", good.dump());
  EXPECT_TRUE(has(error_of([&] { load_hf(out, other); }), "tied_head false"));
}

TEST(HfLlama, ArchitecturesWithoutAHuggingFaceModelAreNotExported) {
  TempDir tmp;
  nn::GptConfig biased = llama_config();
  biased.bias = true;
  save_model(tmp.path("ck"), biased);
  EXPECT_NE(error_of([&] {
              export_hf(tmp.path("ck"), tmp.path("m"));
            }).find("attention_bias and mlp_bias are not implemented"),
            std::string::npos);
  nn::GptConfig rms_gpt = nn::GptConfig{};
  rms_gpt.vocab = 61;
  rms_gpt.seq = 8;
  rms_gpt.layers = 1;
  rms_gpt.width = 16;
  rms_gpt.norm = nn::NormKind::rms;
  save_model(tmp.path("ck2"), rms_gpt);
  EXPECT_NE(error_of([&] { export_hf(tmp.path("ck2"), tmp.path("m2")); }).find("norm rmsnorm"),
            std::string::npos);
}

}  // namespace
}  // namespace weft::io
