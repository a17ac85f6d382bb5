// `weft checkpoint export | import | inspect | verify`: Hugging Face files and
// checkpoint contents.
#include "weft/io/checkpoint.h"

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "weft/comm/grid.h"
#include "weft/core/error.h"
#include "weft/io/checkpoint_dir.h"
#include "weft/io/checkpoint_verify.h"
#include "weft/io/hf_export.h"
#include "weft/io/hf_files.h"
#include "weft/io/safetensors.h"
#include "weft/parallel/pipeline/stages.h"

namespace {

namespace fs = std::filesystem;
using weft::io::Json;

// Filesystem exceptions are user-caused here (paths): report them as weft::Errors.
template <typename Fn>
int guarded(Fn fn) {
  try {
    return fn();
  } catch (const fs::filesystem_error& e) {
    throw weft::Error(e.what());
  }
}

void expect_positionals(const weft::cli::Options& opts, size_t n, const std::string& usage) {
  WEFT_CHECK(opts.positionals().size() == n, "expected {} argument{}: {}", n, n == 1 ? "" : "s",
             usage);
}

std::string bytes_text(int64_t b) {
  std::ostringstream s;
  if (b < 1024) {
    s << b << " B";
  } else {
    s << std::fixed << std::setprecision(1);
    if (b < (1 << 20)) {
      s << b / 1024.0 << " KiB";
    } else {
      s << b / 1048576.0 << " MiB";
    }
  }
  return s.str();
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

std::string split_text(const weft::io::SavedTensor& t) {
  if (t.split_dim < 0) return "-";
  return weft::format("dim {}{}", t.split_dim, t.blocks > 1 ? weft::format(" x{}", t.blocks) : "");
}

std::string shards_text(const weft::io::SavedTensor& t) {
  std::string s;
  for (const auto& sh : t.shards) {
    std::string f = sh.file.substr(0, sh.file.find(".safetensors"));
    s += (s.empty() ? "" : " ") +
         (t.split_dim < 0 ? f : weft::format("{}[{},{})", f, sh.offset, sh.offset + sh.length));
    if (sh.row_length >= 0) {
      s += weft::format(" rows[{},{})", sh.row_offset, sh.row_offset + sh.row_length);
    }
  }
  if (t.valid_rows >= 0) s += weft::format("  (rows < {} valid)", t.valid_rows);
  return s;
}

void print_tensor_table(const std::vector<weft::io::SavedTensor>& tensors) {
  size_t w = 6;
  for (const auto& t : tensors) w = std::max(w, t.name.size() + 2);
  std::cout << pad("tensor", w) << pad("dtype", 6) << pad("global shape", 14) << pad("split", 10)
            << "shards\n";
  for (const auto& t : tensors) {
    std::cout << pad(t.name, w) << pad(t.dtype, 6) << pad(t.global_shape.str(), 14)
              << pad(split_text(t), 10) << shards_text(t) << "\n";
  }
}

// Under --pp: which layers each stage held and which ranks' files hold them.
void print_stage_split(const weft::io::CheckpointReader& ck) {
  const Json* config = ck.index().find("config");
  const Json* pp = config ? config->find("pp") : nullptr;
  if (!pp || !pp->is_number() || pp->as_int() <= 1) return;
  const auto text = [&](const char* key, const std::string& fallback) {
    const Json* v = config->find(key);
    return v && v->is_string() ? v->as_string() : fallback;
  };
  const Json* vpp_json = config->find("vpp");
  const int P = static_cast<int>(pp->as_int());
  const int V = vpp_json && vpp_json->is_number() ? static_cast<int>(vpp_json->as_int()) : 1;
  const std::string schedule = text("pp-schedule", "1f1b");
  const int64_t layers = config->at("layers").as_int();
  namespace pl = weft::parallel::pipeline;
  const std::vector<int64_t> bounds = pl::layer_boundaries(
      pl::split_layers(layers, P, V, text("pp-layers", ""), schedule == "interleaved"));
  const weft::comm::GridLayout layout(ck.world(), ck.order(), ck.sizes());
  std::cout << weft::format("pipeline: {} stages ({}), stage: layers [ranks whose files hold it]\n",
                            P * V, schedule);
  for (int s = 0; s < P * V; ++s) {
    std::vector<int> ranks;
    for (int r = 0; r < ck.world(); ++r) {
      if (layout.coord("pp", r) == s % P) ranks.push_back(r);
    }
    std::string what = weft::format("h.{}-h.{}", bounds[static_cast<size_t>(s)],
                                    bounds[static_cast<size_t>(s) + 1] - 1);
    if (s == 0) what = "embedding, " + what;
    if (s == P * V - 1) what += ", final norm, head";
    std::cout << weft::format("  stage {}: {} {}\n", s, what, ranks);
  }
}

void inspect_dir(const std::string& dir, bool json) {
  weft::io::CheckpointReader ck(dir);
  if (json) {
    Json out = ck.index();
    out["path"] = dir;
    std::cout << out.dump() << "\n";
    return;
  }
  const Json& idx = ck.index();
  std::cout << "checkpoint " << dir << " (weft checkpoint format "
            << idx.at("format_version").as_int() << ")\n"
            << "step " << ck.step() << ", data seed " << idx.at("data_seed").dump() << "\n"
            << "layout: world " << ck.world() << ", order " << ck.order();
  for (const auto& [dim, size] : ck.sizes()) std::cout << ", " << dim << " " << size;
  if (const Json* sp = idx.at("layout").find("sp")) std::cout << ", sp " << sp->as_string();
  std::cout << "\n";
  print_stage_split(ck);
  if (const Json* m = ck.model_shape()) {
    std::cout << "model:";
    bool first = true;
    for (const auto& [k, v] : m->as_object()) {
      std::cout << (first ? " " : ", ") << k << " " << v.dump();
      first = false;
    }
    std::cout << "\n";
  }
  std::cout << "optimizer: "
            << (ck.has_optimizer()
                    ? weft::format("adamw, {} steps", idx.at("optimizer").at("steps").as_int())
                    : std::string("none"))
            << "\nchecksums: "
            << (ck.has_checksums() ? "XXH3-64 of every tensor, header and JSON file (weft "
                                     "checkpoint verify checks them all)"
                                   : "none (written by an earlier weft)")
            << "\nfiles:";
  for (const Json& f : idx.at("files").as_array()) {
    const fs::path p = fs::path(dir) / f.as_string();
    std::cout << "\n  " << pad(f.as_string(), 30)
              << (fs::exists(p) ? bytes_text(static_cast<int64_t>(fs::file_size(p))) : "MISSING");
  }
  int64_t params = 0;
  for (const auto& t : ck.tensors()) params += t.global_shape.numel();
  std::cout << "\n\nsplit: the dimension split across ranks (xB: in B equal blocks, each split,\n"
               "as the fused q|k|v rows); shards: FILE[begin,end) along it, in every block\n";
  std::cout << "\n" << ck.tensors().size() << " parameters (" << params << " values):\n";
  print_tensor_table(ck.tensors());
  if (ck.has_optimizer()) {
    std::cout << "\n" << ck.optimizer_tensors().size() << " optimizer tensors:\n";
    print_tensor_table(ck.optimizer_tensors());
  }
}

void inspect_file(const std::string& path, bool json) {
  weft::io::HfModelFiles f(path);
  Json model;
  std::string model_error;
  try {
    model = weft::io::hf_config(path);
  } catch (const weft::Error& e) {
    model_error = e.what();
  }
  if (json) {
    Json out = Json::object();
    out["path"] = path;
    Json meta = Json::object();
    for (const auto& [k, v] : f.metadata()) meta[k] = v;
    out["metadata"] = std::move(meta);
    Json tensors = Json::array();
    Json files = Json::array();
    for (const auto& file : f.files()) files.push_back(file->path());
    out["files"] = std::move(files);
    for (const weft::io::TensorInfo* t : f.tensors()) {
      Json j = Json::object();
      j["name"] = t->name;
      j["dtype"] = t->dtype;
      Json shape = Json::array();
      for (int64_t d : t->shape) shape.push_back(d);
      j["shape"] = std::move(shape);
      tensors.push_back(std::move(j));
    }
    out["tensors"] = std::move(tensors);
    out["model"] = model;
    std::cout << out.dump() << "\n";
    return;
  }
  int64_t data_bytes = 0;
  for (const auto& file : f.files()) data_bytes += file->data_bytes();
  std::cout << (f.files().size() > 1 || f.files()[0]->path() != path ? "Hugging Face model "
                                                                     : "safetensors file ")
            << path << ": " << f.tensors().size() << " tensors, " << bytes_text(data_bytes)
            << " of data";
  if (f.files().size() > 1) std::cout << " in " << f.files().size() << " shards";
  std::cout << "\n";
  for (const auto& [k, v] : f.metadata()) std::cout << "metadata " << k << ": " << v << "\n";
  if (model.is_object()) {
    const weft::io::Json* positions = model.find("positions");
    const bool llama = positions && *positions == weft::io::Json("rotary");
    std::cout << (llama ? "Llama model:" : "GPT-2 model:");
    bool first = true;
    for (const auto& [k, v] : model.as_object()) {
      std::cout << (first ? " " : ", ") << k << " " << v.dump();
      first = false;
    }
    std::cout << "\n";
  } else {
    std::cout << "not a GPT-2 or Llama model file: " << model_error << "\n";
  }
  size_t w = 6;
  for (const auto* t : f.tensors()) w = std::max(w, t->name.size() + 2);
  std::cout << "\n" << pad("tensor", w) << pad("dtype", 6) << "shape\n";
  for (const auto* t : f.tensors()) {
    std::cout << pad(t->name, w) << pad(t->dtype, 6) << shape_text(t->shape) << "\n";
  }
}

weft::cli::Options inspect_options() {
  weft::cli::Options opts(
      "weft checkpoint inspect DIR|FILE [--json]",
      "Lists what a checkpoint directory or a .safetensors file holds, reading no tensor data.\n"
      "For a checkpoint directory: the step, the layout it was saved at (world size and the\n"
      "size of each grid dimension), the model shape, the files, and each tensor's dtype,\n"
      "global shape, split (dimension and blocks) and which file holds which slice.\n"
      "For a .safetensors file or a Hugging Face model directory (sharded or not): its\n"
      "metadata, tensors, dtypes and shapes, and the model shape when it is a GPT-2 or Llama.");
  opts.positional("DIR|FILE",
                  "a checkpoint directory (a --save directory: its latest), a .safetensors file "
                  "or a Hugging Face model directory")
      .flag("json", "print one JSON object (for a directory: its index.json plus \"path\")");
  return opts;
}

int inspect(const std::vector<std::string>& args) {
  weft::cli::Options opts = inspect_options();
  opts.parse(args);
  expect_positionals(opts, 1, "weft checkpoint inspect DIR|FILE");
  const std::string& path = opts.positionals()[0];
  return guarded([&] {
    WEFT_CHECK(fs::exists(path), "{} does not exist", path);
    if (fs::is_directory(path) && !weft::io::is_hf_directory(path)) {
      inspect_dir(weft::io::resolve_checkpoint(path), opts.flag_set("json"));
    } else {
      inspect_file(path, opts.flag_set("json"));
    }
    return 0;
  });
}

weft::cli::Options export_cmd_options() {
  weft::cli::Options opts(
      "weft checkpoint export DIR OUT [--max-shard-size 5G]",
      "Writes checkpoint DIR (saved at any TP/DP layout) as a Hugging Face model: a GPT-2\n"
      "(GPT2LMHeadModel: transformer.wte.weight with the real vocabulary rows,\n"
      "transformer.h.N.attn.c_attn.weight stored (C, 3C) as Conv1D does, ...) or a Llama\n"
      "(LlamaForCausalLM, for --preset llama-* models: model.layers.N.self_attn.q_proj.weight,\n"
      "k_proj, v_proj, o_proj, mlp.gate_proj, up_proj, down_proj, ...; grouped-query heads,\n"
      "rotary positions, an untied lm_head.weight unless the head is tied) or a Mixtral\n"
      "(MixtralForCausalLM, for --preset moe-tiny-like models: MoE in every layer, top-2,\n"
      "dropless: block_sparse_moe.gate.weight and experts.E.w1/w3/w2).\n"
      "OUT a directory (created if missing): what save_pretrained writes — config.json,\n"
      "generation_config.json, model.safetensors (above --max-shard-size: shards and\n"
      "model.safetensors.index.json) and, for byte-level models (vocabulary 256),\n"
      "tokenizer.json and tokenizer_config.json — so AutoModelForCausalLM.from_pretrained(OUT),\n"
      "AutoTokenizer.from_pretrained(OUT) and pipeline(\"text-generation\", model=OUT) work.\n"
      "Other files in OUT are left alone. OUT ending in .safetensors: that one file and\n"
      "nothing else. Every file is written to a temporary name and renamed.");
  opts.positional("DIR", "a weft checkpoint directory (a --save directory: its latest)")
      .positional("OUT", "a model directory to write, or a .safetensors file")
      .option("max-shard-size", "BYTES", "5G",
              "largest shard of a model directory (as save_pretrained's max_shard_size; 1K, 64M)");
  return opts;
}

int export_cmd(const std::vector<std::string>& args) {
  weft::cli::Options opts = export_cmd_options();
  opts.parse(args);
  expect_positionals(opts, 2, "weft checkpoint export DIR OUT");
  const std::string dir = opts.positionals()[0], out = opts.positionals()[1];
  weft::io::HfDirectoryOptions options;
  options.max_shard_bytes = opts.bytes("max-shard-size");
  WEFT_CHECK(options.max_shard_bytes > 0, "--max-shard-size must be positive");
  return guarded([&] {
    for (const std::string& path :
         weft::io::export_hf(weft::io::resolve_checkpoint(dir), out, options)) {
      std::cout << "wrote " << path << "\n";
    }
    return 0;
  });
}

weft::cli::Options import_cmd_options() {
  weft::cli::Options opts(
      "weft checkpoint import MODEL DIR [--seed S]",
      "Converts a Hugging Face GPT-2, Llama or Mixtral model — a .safetensors file or a\n"
      "save_pretrained directory, sharded or not; GPT-2 names with or without the\n"
      "\"transformer.\" prefix — into a weft checkpoint\n"
      "directory at TP=1 with step 0 and no optimizer state. `weft train --resume DIR` then\n"
      "starts a run from those weights at any --tp/--dp (the optimizer starts afresh). The\n"
      "model shape comes from the tensors; the head count from config.json (in the directory\n"
      "or next to the file), else from weft's metadata, else width / 64 as in every GPT-2\n"
      "size (with a warning). A Llama (config.json model_type \"llama\", or weft's metadata)\n"
      "takes its whole shape from config.json: heads, num_key_value_heads, intermediate_size,\n"
      "rms_norm_eps, rope_theta, tie_word_embeddings; a Mixtral (\"mixtral\") also\n"
      "num_local_experts and num_experts_per_tok (2). config.json fields that change the math\n"
      "are checked: what weft does not compute (Llama's rope_scaling, attention_bias,\n"
      "mlp_bias, sliding_window, hidden_act other than silu, ...) is refused by name.");
  opts.positional("MODEL",
                  "a GPT-2, Llama or Mixtral .safetensors file or Hugging Face model directory")
      .positional("DIR", "the checkpoint directory to write (replaced if it is a checkpoint)")
      .option("seed", "S", "1337", "the run seed recorded in the checkpoint (random streams)");
  return opts;
}

int import_cmd(const std::vector<std::string>& args) {
  weft::cli::Options opts = import_cmd_options();
  opts.parse(args);
  expect_positionals(opts, 2, "weft checkpoint import MODEL DIR");
  const std::string file = opts.positionals()[0], dir = opts.positionals()[1];
  const int64_t seed = opts.integer("seed");
  WEFT_CHECK(seed >= 0, "--seed must not be negative, got {}", seed);
  return guarded([&] {
    weft::io::import_hf(file, dir, static_cast<uint64_t>(seed));
    std::cout << "wrote checkpoint " << dir << " from " << file
              << "; start a run from it with `weft train --resume " << dir << "`\n";
    return 0;
  });
}

weft::cli::Options verify_options() {
  weft::cli::Options opts(
      "weft checkpoint verify DIR|FILE",
      "Checks every file of a checkpoint directory against the checksums weft wrote with it,\n"
      "reading every byte: index.json and each rank<R>.json against their own checksum, each\n"
      ".safetensors file's header and every tensor against the index (and every value for\n"
      "being finite). Prints one line per file: ok or DAMAGED and why. A checkpoint written\n"
      "before weft wrote checksums, and a Hugging Face .safetensors file or model directory\n"
      "(model.safetensors, config.json), are checked for their structure only. Exit status 0\n"
      "when every file is intact, 2 otherwise.");
  opts.positional("DIR|FILE",
                  "a checkpoint directory (a --save directory: its latest), a .safetensors file "
                  "or a Hugging Face model directory, sharded or not");
  return opts;
}

int verify(const std::vector<std::string>& args) {
  weft::cli::Options opts = verify_options();
  opts.parse(args);
  expect_positionals(opts, 1, "weft checkpoint verify DIR|FILE");
  const std::string& given = opts.positionals()[0];
  return guarded([&] {
    const std::string path = fs::is_directory(given) && !weft::io::is_hf_directory(given)
                                 ? weft::io::resolve_checkpoint(given)
                                 : given;
    const auto verdicts = weft::io::verify_checkpoint(path);
    size_t width = 10, bad = 0;
    for (const auto& v : verdicts) width = std::max(width, v.file.size() + 2);
    for (const auto& v : verdicts) {
      std::cout << pad(v.ok ? "ok" : "DAMAGED", 9) << pad(v.file, width) << v.detail << "\n";
      bad += v.ok ? 0 : 1;
    }
    std::cout.flush();
    WEFT_CHECK(bad == 0,
               "{} of {} checked files of {} failed verification: use another checkpoint "
               "(an earlier save, or a copy)",
               bad, verdicts.size(), path);
    return 0;
  });
}

const weft::cli::Register reg_export(
    "checkpoint export",
    "write a checkpoint as a Hugging Face GPT-2 or Llama model directory or file",
    export_cmd_options, export_cmd);
const weft::cli::Register reg_import(
    "checkpoint import", "turn a Hugging Face GPT-2 or Llama model into a checkpoint to train from",
    import_cmd_options, import_cmd);
const weft::cli::Register reg_inspect("checkpoint inspect",
                                      "list the tensors, shapes and layout of a checkpoint or file",
                                      inspect_options, inspect);
const weft::cli::Register reg_verify("checkpoint verify",
                                     "check every file of a checkpoint against its checksums",
                                     verify_options, verify);

}  // namespace
