// `weft checkpoint export | import | inspect | verify`: Hugging Face files and
// checkpoint contents.
#include "weft/train/checkpoint.h"

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "weft/core/error.h"
#include "weft/train/checkpoint_verify.h"
#include "weft/train/hf_export.h"
#include "weft/train/safetensors.h"

namespace {

namespace fs = std::filesystem;
using weft::train::Json;

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

std::string split_text(const weft::train::SavedTensor& t) {
  if (t.split_dim < 0) return "-";
  return weft::format("dim {}{}", t.split_dim, t.blocks > 1 ? weft::format(" x{}", t.blocks) : "");
}

std::string shards_text(const weft::train::SavedTensor& t) {
  std::string s;
  for (const auto& sh : t.shards) {
    std::string f = sh.file.substr(0, sh.file.find(".safetensors"));
    s += (s.empty() ? "" : " ") +
         (t.split_dim < 0 ? f : weft::format("{}[{},{})", f, sh.offset, sh.offset + sh.length));
  }
  if (t.valid_rows >= 0) s += weft::format("  (rows < {} valid)", t.valid_rows);
  return s;
}

void print_tensor_table(const std::vector<weft::train::SavedTensor>& tensors) {
  size_t w = 6;
  for (const auto& t : tensors) w = std::max(w, t.name.size() + 2);
  std::cout << pad("tensor", w) << pad("dtype", 6) << pad("global shape", 14) << pad("split", 10)
            << "shards\n";
  for (const auto& t : tensors) {
    std::cout << pad(t.name, w) << pad(t.dtype, 6) << pad(t.global_shape.str(), 14)
              << pad(split_text(t), 10) << shards_text(t) << "\n";
  }
}

void inspect_dir(const std::string& dir, bool json) {
  weft::train::CheckpointReader ck(dir);
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
  weft::train::SafetensorsFile f(path);
  Json model;
  std::string model_error;
  try {
    model = weft::train::hf_config(path);
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
    for (const auto& t : f.tensors()) {
      Json j = Json::object();
      j["name"] = t.name;
      j["dtype"] = t.dtype;
      Json shape = Json::array();
      for (int64_t d : t.shape) shape.push_back(d);
      j["shape"] = std::move(shape);
      tensors.push_back(std::move(j));
    }
    out["tensors"] = std::move(tensors);
    out["model"] = model;
    std::cout << out.dump() << "\n";
    return;
  }
  std::cout << "safetensors file " << path << ": " << f.tensors().size() << " tensors, "
            << bytes_text(f.data_bytes()) << " of data\n";
  for (const auto& [k, v] : f.metadata()) std::cout << "metadata " << k << ": " << v << "\n";
  if (model.is_object()) {
    std::cout << "GPT-2 model:";
    bool first = true;
    for (const auto& [k, v] : model.as_object()) {
      std::cout << (first ? " " : ", ") << k << " " << v.dump();
      first = false;
    }
    std::cout << "\n";
  } else {
    std::cout << "not a GPT-2 model file: " << model_error << "\n";
  }
  size_t w = 6;
  for (const auto& t : f.tensors()) w = std::max(w, t.name.size() + 2);
  std::cout << "\n" << pad("tensor", w) << pad("dtype", 6) << "shape\n";
  for (const auto& t : f.tensors()) {
    std::cout << pad(t.name, w) << pad(t.dtype, 6) << shape_text(t.shape) << "\n";
  }
}

int inspect(const std::vector<std::string>& args) {
  weft::cli::Options opts(
      "weft checkpoint inspect DIR|FILE [--json]",
      "Lists what a checkpoint directory or a .safetensors file holds, reading no tensor data.\n"
      "For a checkpoint directory: the step, the layout it was saved at (world size and the\n"
      "size of each grid dimension), the model shape, the files, and each tensor's dtype,\n"
      "global shape, split (dimension and blocks) and which file holds which slice.\n"
      "For a .safetensors file: its metadata, tensors, dtypes and shapes, and the GPT-2\n"
      "model shape when it is one.");
  opts.positional("DIR|FILE", "a checkpoint directory or a .safetensors file")
      .flag("json", "print one JSON object (for a directory: its index.json plus \"path\")");
  opts.parse(args);
  expect_positionals(opts, 1, "weft checkpoint inspect DIR|FILE");
  const std::string& path = opts.positionals()[0];
  return guarded([&] {
    WEFT_CHECK(fs::exists(path), "{} does not exist", path);
    if (fs::is_directory(path)) {
      inspect_dir(path, opts.flag_set("json"));
    } else {
      inspect_file(path, opts.flag_set("json"));
    }
    return 0;
  });
}

int export_cmd(const std::vector<std::string>& args) {
  weft::cli::Options opts(
      "weft checkpoint export DIR FILE.safetensors",
      "Writes checkpoint DIR (saved at any TP/DP layout) as one consolidated file with the\n"
      "Hugging Face GPT-2 names and layouts (transformer.wte.weight with the real vocabulary\n"
      "rows, transformer.h.N.attn.c_attn.weight stored (C, 3C) as Conv1D does, ...), and a\n"
      "config.json next to it. Name the file model.safetensors and its directory loads with\n"
      "GPT2LMHeadModel.from_pretrained(DIRECTORY). The file is written atomically.");
  opts.positional("DIR", "a weft checkpoint directory")
      .positional("FILE", "the .safetensors file to write (config.json goes next to it)");
  opts.parse(args);
  expect_positionals(opts, 2, "weft checkpoint export DIR FILE.safetensors");
  const std::string dir = opts.positionals()[0], file = opts.positionals()[1];
  return guarded([&] {
    weft::train::export_hf(dir, file);
    const fs::path config = fs::path(file).parent_path() / "config.json";
    std::cout << "wrote " << file << " and " << config.string() << "\n";
    if (fs::path(file).filename() != "model.safetensors") {
      std::cout << "note: from_pretrained(directory) looks for model.safetensors; rename the "
                   "file to load it that way\n";
    }
    return 0;
  });
}

int import_cmd(const std::vector<std::string>& args) {
  weft::cli::Options opts(
      "weft checkpoint import FILE.safetensors DIR [--seed S]",
      "Converts a Hugging Face GPT-2 file (with or without the \"transformer.\" prefix, e.g.\n"
      "one written by `weft checkpoint export` or by save_pretrained) into a weft checkpoint\n"
      "directory at TP=1 with step 0 and no optimizer state. `weft train --resume DIR` then\n"
      "starts a run from those weights at any --tp/--dp (the optimizer starts afresh). The\n"
      "model shape comes from the tensors; the head count from config.json next to FILE,\n"
      "else from weft's metadata, else width / 64 as in every GPT-2 size.");
  opts.positional("FILE", "a consolidated GPT-2 .safetensors file")
      .positional("DIR", "the checkpoint directory to write (replaced if it is a checkpoint)")
      .option("seed", "S", "1337", "the run seed recorded in the checkpoint (random streams)");
  opts.parse(args);
  expect_positionals(opts, 2, "weft checkpoint import FILE.safetensors DIR");
  const std::string file = opts.positionals()[0], dir = opts.positionals()[1];
  const int64_t seed = opts.integer("seed");
  WEFT_CHECK(seed >= 0, "--seed must not be negative, got {}", seed);
  return guarded([&] {
    weft::train::import_hf(file, dir, static_cast<uint64_t>(seed));
    std::cout << "wrote checkpoint " << dir << " from " << file
              << "; start a run from it with `weft train --resume " << dir << "`\n";
    return 0;
  });
}

int verify(const std::vector<std::string>& args) {
  weft::cli::Options opts(
      "weft checkpoint verify DIR|FILE",
      "Checks every file of a checkpoint directory against the checksums weft wrote with it,\n"
      "reading every byte: index.json and each rank<R>.json against their own checksum, each\n"
      ".safetensors file's header and every tensor against the index (and every value for\n"
      "being finite). Prints one line per file: ok or DAMAGED and why. A checkpoint written\n"
      "before weft wrote checksums, and a Hugging Face .safetensors file or model directory\n"
      "(model.safetensors, config.json), are checked for their structure only. Exit status 0\n"
      "when every file is intact, 2 otherwise.");
  opts.positional("DIR|FILE", "a checkpoint directory, a .safetensors file or a model directory");
  opts.parse(args);
  expect_positionals(opts, 1, "weft checkpoint verify DIR|FILE");
  const std::string& path = opts.positionals()[0];
  return guarded([&] {
    const auto verdicts = weft::train::verify_checkpoint(path);
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
    "checkpoint export", "write a checkpoint as one Hugging Face GPT-2 .safetensors file",
    export_cmd);
const weft::cli::Register reg_import(
    "checkpoint import", "turn a Hugging Face GPT-2 file into a checkpoint to train from",
    import_cmd);
const weft::cli::Register reg_inspect("checkpoint inspect",
                                      "list the tensors, shapes and layout of a checkpoint or file",
                                      inspect);
const weft::cli::Register reg_verify("checkpoint verify",
                                     "check every file of a checkpoint against its checksums",
                                     verify);

}  // namespace
