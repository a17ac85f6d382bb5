#include "weft/io/checkpoint_verify.h"

#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "weft/io/checkpoint_format.h"
#include "weft/io/checkpoint_tokenizer.h"
#include "weft/io/hf_export.h"
#include "weft/io/hf_files.h"
#include "weft/io/safetensors.h"

namespace weft::io {

namespace {

namespace fs = std::filesystem;

std::string mib(int64_t bytes) { return format("{} MiB", (bytes * 10 / 1048576) / 10.0); }

// fn() gives the detail of a good file; an exception is the detail of a bad one.
template <typename Fn>
FileVerdict check(const std::string& file, Fn fn) {
  try {
    return {file, true, fn()};
  } catch (const std::exception& e) {
    return {file, false, e.what()};
  }
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  WEFT_CHECK(in, "cannot read {}", path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string hf_structure(const std::string& path) {
  SafetensorsFile f(path);
  const Json shape = hf_config(path);
  return format(
      "structure ok: {} tensors, {} of data, GPT-2 width {} (the format has no "
      "checksums)",
      f.tensors().size(), mib(f.data_bytes()), shape.at("width").dump());
}

// A Hugging Face model directory: its index (when sharded), every
// safetensors file and config.json, for structure (the format has no
// checksums).
std::vector<FileVerdict> verify_hf_directory(const fs::path& p, const std::string& path) {
  std::vector<FileVerdict> out;
  std::unique_ptr<HfModelFiles> hf;
  const bool sharded = fs::exists(p / "model.safetensors.index.json");
  out.push_back(check(sharded ? "model.safetensors.index.json" : "model.safetensors", [&] {
    hf = std::make_unique<HfModelFiles>(path);
    const Json shape = hf_config(path);
    return format(
        "structure ok: {} tensors in {} file(s), GPT-2 width {} (the format has no "
        "checksums)",
        hf->tensors().size(), hf->files().size(), shape.at("width").dump());
  }));
  if (hf && sharded) {
    for (const auto& f : hf->files()) {
      out.push_back(check(fs::path(f->path()).filename().string(), [&] {
        return format("structure ok: {} tensors, {}", f->tensors().size(), mib(f->data_bytes()));
      }));
    }
  }
  if (fs::exists(p / "config.json")) {
    out.push_back(check("config.json", [&] {
      const Json j = parse_json(read_text(p / "config.json"), (p / "config.json").string());
      WEFT_CHECK(j.is_object(), "{} is not a JSON object", (p / "config.json").string());
      return std::string("structure ok: a JSON object (no checksum in this format)");
    }));
  }
  return out;
}

// Reads every tensor the index places in safetensors file `name` (the
// reader checks checksums and finiteness), and that the file holds no others.
std::string verify_tensor_file(const CheckpointReader& ck, const std::string& name) {
  const SafetensorsFile& sf = ck.file(name);
  int64_t tensors = 0;
  for (const auto* section : {&ck.tensors(), &ck.optimizer_tensors()}) {
    for (const SavedTensor& t : *section) {
      for (const SavedShard& s : t.shards) {
        if (s.file != name) continue;
        ck.read_shard(t, s);
        ++tensors;
      }
    }
  }
  WEFT_CHECK(tensors == static_cast<int64_t>(sf.tensors().size()),
             "{} holds {} tensors, the index lists {} in it", sf.path(), sf.tensors().size(),
             tensors);
  return format("{} {} tensors, {}, all values finite",
                ck.has_checksums() ? "header and checksums of" : "structure ok (no checksums):",
                tensors, mib(sf.data_bytes()));
}

std::string verify_json_file(const fs::path& file, bool sums) {
  bool sealed = false;
  parse_sealed_json(read_text(file), file.string(), sealed);
  WEFT_CHECK(sealed || !sums, "{} is damaged: it has no checksum, unlike its index", file.string());
  return std::string(sealed ? "checksum ok" : "structure ok (no checksum)");
}

std::vector<FileVerdict> verify_weft_checkpoint(const fs::path& p, const std::string& path) {
  std::vector<FileVerdict> out;
  std::unique_ptr<CheckpointReader> ck;
  out.push_back(check("index.json", [&] {
    ck = std::make_unique<CheckpointReader>(path, ReadOptions{.note_unverified = false});
    return format("{}: {} parameters, {} optimizer tensors, step {}",
                  ck->has_checksums() ? "checksum ok"
                                      : "no checksums (written by an earlier "
                                        "weft): structure only",
                  ck->tensors().size(), ck->optimizer_tensors().size(), ck->step());
  }));
  if (!ck) return out;
  const bool sums = ck->has_checksums();
  for (const Json& f : ck->index().at("files").as_array()) {
    const std::string name = f.as_string();
    if (name.ends_with(".safetensors")) {
      out.push_back(check(name, [&] { return verify_tensor_file(*ck, name); }));
    } else {
      out.push_back(check(name, [&] { return verify_json_file(p / name, sums); }));
    }
  }
  // The tokenizer the checkpoint carries (checkpoint_tokenizer.h).
  if (ck->index().find("tokenizer")) {
    out.push_back(check(kTokenizerFile, [&] {
      return format("checksum ok: {} bytes", checkpoint_tokenizer(p.string()).size());
    }));
  }
  return out;
}

}  // namespace

std::vector<FileVerdict> verify_checkpoint(const std::string& path) {
  const fs::path p(path);
  if (fs::is_regular_file(p)) {
    return {check(p.filename().string(), [&] { return hf_structure(path); })};
  }
  WEFT_CHECK(fs::is_directory(p),
             "{} does not exist: give a checkpoint directory or a .safetensors "
             "file",
             path);
  if (is_hf_directory(path)) return verify_hf_directory(p, path);
  WEFT_CHECK(fs::exists(p / "index.json"),
             "{} is neither a weft checkpoint (no index.json) nor a Hugging Face model directory "
             "(no model.safetensors)",
             path);
  return verify_weft_checkpoint(p, path);
}

}  // namespace weft::io
