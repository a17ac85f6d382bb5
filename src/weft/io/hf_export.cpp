#include "weft/io/hf_export.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "weft/comm/grid.h"
#include "weft/comm/local.h"
#include "weft/io/checkpoint.h"
#include "weft/io/checkpoint_tokenizer.h"
#include "weft/io/hf_files.h"
#include "weft/io/hf_llama.h"
#include "weft/io/hf_tokenizer.h"
#include "weft/io/safetensors.h"
#include "weft/io/tokenizer.h"
#include "weft/nn/gpt.h"

namespace weft::io {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "transformer.";
// Every GPT-2 size (124M to 1.5B) has 64-wide heads.
constexpr int64_t kGpt2HeadWidth = 64;

// weft module name -> Hugging Face module name, inside a block.
constexpr std::pair<const char*, const char*> kRenames[] = {
    {".attn.qkv.", ".attn.c_attn."},
    {".attn.proj.", ".attn.c_proj."},
    {".mlp.fc1.", ".mlp.c_fc."},
    {".mlp.fc2.", ".mlp.c_proj."},
};

bool is_block_param(const std::string& name, const std::string& part) {
  // "h.<digits>.<part>"
  if (!name.starts_with("h.")) return false;
  size_t i = 2;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  return i > 2 && name.compare(i, std::string::npos, "." + part) == 0;
}

// (rows, cols) -> (cols, rows)
Tensor transpose(const Tensor& t) {
  WEFT_CHECK(t.dim() == 2 && t.dtype() == DType::f32, "transpose needs a 2-D f32 tensor");
  const int64_t r = t.size(0), c = t.size(1);
  Tensor out = Tensor::empty({c, r});
  const float* in = t.data<float>();
  float* o = out.data<float>();
  for (int64_t i = 0; i < r; ++i) {
    for (int64_t j = 0; j < c; ++j) o[j * r + i] = in[i * c + j];
  }
  return out;
}

// "transformer." when the file's names carry it, "" when not (the original gpt2 files).
std::string name_prefix(const HfModelFiles& f) {
  if (f.find(std::string(kPrefix) + "wte.weight")) return kPrefix;
  WEFT_CHECK(f.find("wte.weight"),
             "{} is not a GPT-2 model: it has no transformer.wte.weight (nor wte.weight)",
             f.path());
  return "";
}

// The name in a file with `prefix` of the weft parameter `name`.
std::string file_name_of(const std::string& name, const std::string& prefix) {
  return prefix + hf_name(name).substr(std::string(kPrefix).size());
}

// Says `message` on stderr, once per `key` in this process (the model's
// shape is read several times while it loads).
void warn_once(const std::string& key, const std::string& message) {
  static std::mutex mu;
  static std::set<std::string> said;
  std::lock_guard lock(mu);
  if (said.insert(key).second) std::cerr << "weft: warning: " << message << "\n";
}

// GPT2Config for the model shape, as save_pretrained writes it.
Json gpt2_config(const Json& shape) {
  const int64_t vocab = shape.at("vocab").as_int();
  Json c = Json::object();
  c["architectures"] = Json(Json::Array{Json("GPT2LMHeadModel")});
  c["model_type"] = "gpt2";
  c["vocab_size"] = vocab;
  c["n_positions"] = shape.at("seq").as_int();
  c["n_ctx"] = shape.at("seq").as_int();
  c["n_embd"] = shape.at("width").as_int();
  c["n_layer"] = shape.at("layers").as_int();
  c["n_head"] = shape.at("heads").as_int();
  c["n_inner"] = nullptr;
  c["activation_function"] = "gelu_new";
  c["layer_norm_epsilon"] = 1e-5;
  c["resid_pdrop"] = 0.0;
  c["embd_pdrop"] = 0.0;
  c["attn_pdrop"] = 0.0;
  c["initializer_range"] = 0.02;
  c["scale_attn_weights"] = true;
  c["tie_word_embeddings"] = true;
  c["use_cache"] = true;
  c["bos_token_id"] = vocab - 1;
  c["eos_token_id"] = vocab - 1;
  c["torch_dtype"] = "float32";
  return c;
}

Json generation_config(const Json& shape) {
  const int64_t vocab = shape.at("vocab").as_int();
  Json g = Json::object();
  g["_from_model_config"] = true;
  g["bos_token_id"] = vocab - 1;
  g["eos_token_id"] = vocab - 1;
  return g;
}

// Every GPT2Config field that changes the math weft computes: a value weft
// computes differently is refused by name rather than evaluated as another
// model.
void check_gpt2_math(const Json& c, const std::string& where, int64_t width) {
  auto field = [&](const char* key) { return c.find(key); };
  if (const Json* t = field("model_type")) {
    WEFT_CHECK(t->is_string() && t->as_string() == "gpt2", "{}: model_type {} is not gpt2", where,
               t->dump());
  }
  if (const Json* a = field("activation_function")) {
    const bool tanh_gelu =
        a->is_string() && (a->as_string() == "gelu_new" || a->as_string() == "gelu_pytorch_tanh");
    WEFT_CHECK(tanh_gelu,
               "{}: activation_function {} is not supported; weft computes GELU with the tanh "
               "approximation (gelu_new / gelu_pytorch_tanh)",
               where, a->dump());
  }
  if (const Json* e = field("layer_norm_epsilon")) {
    WEFT_CHECK(e->is_number() && std::abs(e->as_double() - 1e-5) <= 1e-12,
               "{}: layer_norm_epsilon {} is not supported; weft's LayerNorm uses 1e-5", where,
               e->dump());
  }
  auto expect_bool = [&](const char* key, bool want, const char* why) {
    if (const Json* v = field(key)) {
      WEFT_CHECK(v->is_bool() && v->as_bool() == want, "{}: {} {} is not supported; {}", where, key,
                 v->dump(), why);
    }
  };
  expect_bool("scale_attn_weights", true, "weft scales attention scores by 1/sqrt(head width)");
  expect_bool("scale_attn_by_inverse_layer_idx", false,
              "weft does not scale attention by the inverse layer index");
  expect_bool("tie_word_embeddings", true, "weft's output head is tied to the token embedding");
  expect_bool("add_cross_attention", false, "weft's GPT has no cross-attention");
  const Json* inner = field("n_inner");
  WEFT_CHECK(!inner || inner->is_null() || (inner->is_integer() && inner->as_int() == 4 * width),
             "{}: n_inner {} is not 4 x n_embd; weft's MLP is 4 x width", where,
             inner ? inner->dump() : "");
}

// The file's shape against the model's: every key (the architecture too),
// except that a longer context is fine (the model keeps the first positions
// of wpe; rotary positions have no table in the file).
void check_shape(const Json& file_shape, const nn::GptConfig& cfg, const std::string& file) {
  const Json mine = model_shape_json(cfg);
  WEFT_CHECK(file_shape.at("seq").as_int() >= mine.at("seq").as_int(),
             "{} holds {} positions, fewer than this model's --seq {}: use --seq {} or less", file,
             file_shape.at("seq").dump(), mine.at("seq").dump(), file_shape.at("seq").dump());
  for (const auto& [key, value] : mine.as_object()) {
    if (key == "seq" || key == "vocab_pad") continue;
    const Json* theirs = file_shape.find(key);
    if (!theirs) continue;
    std::string flag = key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    WEFT_CHECK(*theirs == value,
               "{} holds a model with {} {}, but this model has {} {}: build the model with the "
               "file's shape (--{} {})",
               file, key, theirs->dump(), key, value.dump(), flag, theirs->dump());
  }
}

// The model's config.json, parsed (null when there is none).
Json read_config(const HfModelFiles& f) {
  const std::string& path = f.config_path();
  if (path.empty()) return Json();
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  Json c = parse_json(text.str(), path);
  WEFT_CHECK(c.is_object(), "{} is not a JSON object: is it a model's config.json?", path);
  return c;
}

// The shape of GPT-2 files (see hf_config).
Json gpt2_shape(const HfModelFiles& f, const Json& c) {
  const std::string& file = f.path();
  const std::string prefix = name_prefix(f);
  const TensorInfo& wte = f.info(prefix + "wte.weight");
  const TensorInfo& wpe = f.info(prefix + "wpe.weight");
  WEFT_CHECK(wte.shape.size() == 2 && wpe.shape.size() == 2 && wte.shape[1] == wpe.shape[1],
             "{}: wte and wpe must be 2-D with the same width", file);
  int64_t layers = 0;
  while (f.find(prefix + format("h.{}.ln_1.weight", layers))) ++layers;
  WEFT_CHECK(layers > 0, "{} is not a GPT-2 file: it has no {}h.0.ln_1.weight", file, prefix);
  Json shape = Json::object();
  shape["vocab"] = wte.shape[0];
  shape["seq"] = wpe.shape[0];
  shape["layers"] = layers;
  shape["width"] = wte.shape[1];
  const int64_t width = wte.shape[1];
  Json weft_model;
  if (auto it = f.metadata().find("weft.model"); it != f.metadata().end()) {
    weft_model = parse_json(it->second, file + " weft.model metadata");
  }
  if (c.is_object()) {
    const std::string config_path = f.config_path();
    check_gpt2_math(c, config_path, width);
    for (auto [key, ours] : {std::pair{"vocab_size", "vocab"}, std::pair{"n_positions", "seq"},
                             std::pair{"n_layer", "layers"}, std::pair{"n_embd", "width"}}) {
      const Json* v = c.find(key);
      WEFT_CHECK(!v || *v == shape.at(ours), "{} says {} {}, but {} has {} {}", config_path, key,
                 v ? v->dump() : "", file, ours, shape.at(ours).dump());
    }
    const Json* heads = c.find("n_head");
    WEFT_CHECK(heads && heads->is_integer() && heads->as_int() > 0,
               "{} has no positive integer n_head", config_path);
    shape["heads"] = heads->as_int();
  } else if (weft_model.is_object() && weft_model.find("heads")) {
    shape["heads"] = weft_model.at("heads").as_int();
  } else {
    WEFT_CHECK(
        width % kGpt2HeadWidth == 0,
        "cannot tell the number of heads of {}: put its config.json (with n_head) next to it",
        file);
    shape["heads"] = width / kGpt2HeadWidth;
    warn_once(file, format("{} has no config.json: assuming {} heads of width {} as every GPT-2 "
                           "size has; put the model's config.json next to it if that is wrong",
                           file, width / kGpt2HeadWidth, kGpt2HeadWidth));
  }
  shape["vocab_pad"] = weft_model.is_object() && weft_model.find("vocab_pad")
                           ? weft_model.at("vocab_pad").as_int()
                           : nn::kDefaultVocabPad;
  // The rest of the shape is GPT-2's architecture (GptConfig's defaults).
  return model_shape_json(apply_model_shape(nn::GptConfig{}, shape));
}

}  // namespace

std::string hf_name(const std::string& weft_name) {
  static const std::set<std::string> kTop = {"wte.weight", "wpe.weight", "ln_f.weight",
                                             "ln_f.bias"};
  if (kTop.count(weft_name)) return kPrefix + weft_name;
  for (const char* part : {"ln_1.weight", "ln_1.bias", "ln_2.weight", "ln_2.bias"}) {
    if (is_block_param(weft_name, part)) return kPrefix + weft_name;
  }
  for (const auto& [from, to] : kRenames) {
    for (const char* leaf : {"weight", "bias"}) {
      const std::string part = std::string(from + 1) + leaf;
      if (is_block_param(weft_name, part)) {
        return kPrefix + weft_name.substr(0, weft_name.size() - part.size()) + (to + 1) + leaf;
      }
    }
  }
  WEFT_FAIL("parameter {} has no Hugging Face GPT-2 name (only GPT models export)", weft_name);
}

bool hf_transposed(const std::string& weft_name) {
  for (const auto& [from, to] : kRenames) {
    if (is_block_param(weft_name, std::string(from + 1) + "weight")) return true;
  }
  return false;
}

std::vector<std::string> export_hf(const std::string& checkpoint_dir, const std::string& out,
                                   const HfDirectoryOptions& options) {
  CheckpointReader ck(checkpoint_dir);
  WEFT_CHECK(ck.model_shape(),
             "checkpoint {} holds no GPT model shape: only GPT checkpoints export to Hugging Face",
             checkpoint_dir);
  const Json& shape = *ck.model_shape();
  const bool llama =
      hf_architecture_of(shape, "checkpoint " + checkpoint_dir) == HfArchitecture::llama;
  std::vector<NamedTensor> tensors;
  if (llama) {
    tensors = llama_hf_tensors(ck, shape);
  } else {
    for (const SavedTensor& t : ck.tensors()) {
      Tensor full = ck.read_full(t);
      if (t.valid_rows >= 0 && t.valid_rows < full.size(0)) full = full.narrow(0, t.valid_rows);
      if (hf_transposed(t.name)) full = transpose(full);
      tensors.push_back({hf_name(t.name), full});
    }
  }
  // A GPT-2's metadata keeps the keys it had before weft knew other
  // architectures (the rest are GPT-2's by definition), so its files stay
  // byte for byte what earlier weft versions wrote.
  Json model_metadata = shape;
  if (!llama) {
    model_metadata = Json::object();
    for (const char* key : {"vocab", "seq", "layers", "width", "heads", "vocab_pad"}) {
      if (const Json* v = shape.find(key)) model_metadata[key] = *v;
    }
  }
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"weft.model", model_metadata.dump()},
      {"weft.step", std::to_string(ck.step())},
  };
  if (out.ends_with(".safetensors")) {
    write_safetensors(out, tensors, metadata);
    return {out};
  }
  std::map<std::string, Json> files = {
      {"config.json", llama ? llama_config(shape) : gpt2_config(shape)},
      {"generation_config.json", generation_config(shape)}};
  // The checkpoint's own tokenizer when it carries one, else weft's byte
  // tokenizer for byte-level models.
  if (const std::string tok = checkpoint_tokenizer(checkpoint_dir); !tok.empty()) {
    set_special_token_ids(tok, files.at("config.json"));
    set_special_token_ids(tok, files.at("generation_config.json"));
    files.merge(hf_tokenizer_files(tok, shape.at("seq").as_int()));
  } else if (shape.at("vocab").as_int() == ByteTokenizer::kVocabSize) {
    files.merge(byte_tokenizer_files(shape.at("seq").as_int()));
  }
  std::vector<std::string> written = write_hf_directory(out, tensors, metadata, files, options);
  for (std::string& name : written) name = (fs::path(out) / name).string();
  return written;
}

Json hf_config(const std::string& file) {
  HfModelFiles f(file);
  const Json config = read_config(f);
  return is_llama_files(f, config) ? llama_shape(f, config) : gpt2_shape(f, config);
}

void load_hf(const std::string& file, nn::Module& model, bool allow_nonfinite) {
  if (auto* gpt = dynamic_cast<nn::Gpt*>(&model)) check_shape(hf_config(file), gpt->config(), file);
  HfModelFiles f(file);
  if (is_llama_files(f, read_config(f))) {
    load_llama_hf(f, model, allow_nonfinite);
    return;
  }
  const std::string prefix = name_prefix(f);
  std::set<std::string> used;
  for (nn::Parameter* p : model.parameters()) {
    const std::string name = file_name_of(p->name, prefix);
    WEFT_CHECK(f.find(name), "{} has no tensor {} (for parameter {})", file, name, p->name);
    used.insert(name);
    Tensor t = f.load(name).to(DType::f32);
    if (!allow_nonfinite) check_finite(t, "tensor " + name, file);
    if (hf_transposed(p->name)) {
      WEFT_CHECK(t.dim() == 2, "{}: {} must be 2-D, it is {}", file, name, t.shape());
      t = transpose(t);
    }
    const Shape& global = p->spec.global_shape;
    // A model with a shorter context keeps the first positions.
    if (p->name == "wpe.weight" && t.dim() == 2 && t.size(0) > global[0]) {
      t = t.narrow(0, global[0]);
    }
    if (p->spec.valid_rows >= 0 && t.dim() == 2 && t.size(0) == p->spec.valid_rows &&
        global[0] > t.size(0)) {
      Tensor padded = Tensor::zeros(global);
      padded.narrow(0, t.size(0)).copy_from(t);
      t = padded;
    }
    WEFT_CHECK(t.shape() == global, "{}: {} has shape {}, but parameter {} needs {}", file, name,
               t.shape(), p->name, global);
    p->value.copy_from(nn::shard_of(p->spec, t));
    ++p->version;  // weight sources recast it
  }
  for (const TensorInfo* info : f.tensors()) {
    const TensorInfo& ti = *info;
    if (used.count(ti.name)) continue;
    if (ti.name.ends_with(".attn.bias") || ti.name.ends_with(".attn.masked_bias")) continue;
    if (ti.name == "lm_head.weight") {
      const std::vector<float> head = f.load(ti.name).to(DType::f32).to_vector();
      WEFT_CHECK(head == f.load(prefix + "wte.weight").to(DType::f32).to_vector(),
                 "{}: lm_head.weight differs from wte.weight; weft ties the output head to the "
                 "token embedding and cannot load an untied model",
                 file);
      continue;
    }
    WEFT_FAIL("{} holds tensor {}, which a weft GPT does not have: is it a GPT-2 file?", file,
              ti.name);
  }
}

void import_hf(const std::string& file, const std::string& dir, uint64_t seed) {
  const Json shape = hf_config(file);
  nn::GptConfig cfg = apply_model_shape(nn::GptConfig{}, shape);
  auto world = comm::local_world_of_one();
  comm::Grid grid(*world, "tp-dp", {{"tp", 1}});
  nn::Gpt model(parallel::make_context(nullptr, nn::SequenceParallel::off, {}, seed), cfg);
  load_hf(file, model);
  TrainState state;
  state.data_seed = seed;
  state.rng = parallel::RngTracker(seed, 0).state();
  state.config = shape;
  state.config["seed"] = seed;
  state.config["imported_from"] = file;
  state.tokenizer = hf_directory_tokenizer(file, cfg.vocab);
  save_checkpoint(dir, *world, grid, model, nullptr, state);
}

}  // namespace weft::io
