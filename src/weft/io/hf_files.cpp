#include "weft/io/hf_files.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "weft/core/error.h"

namespace weft::io {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSingle = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";
// An index names every tensor once: a few MB even for the largest models.
constexpr int64_t kMaxIndexBytes = 64 << 20;

std::string read_small_file(const fs::path& path, int64_t limit) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  WEFT_CHECK(!ec, "cannot read {}: {}", path.string(), ec.message());
  WEFT_CHECK(static_cast<int64_t>(size) <= limit,
             "{} is {} bytes, more than the {} an index may be", path.string(), size, limit);
  std::ifstream in(path, std::ios::binary);
  WEFT_CHECK(in, "cannot open {}: {}", path.string(), std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A shard name from an index: a plain file name, so that an index can never
// point outside its directory.
void check_shard_name(const std::string& name, const fs::path& index) {
  WEFT_CHECK(!name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
                 name.find('\0') == std::string::npos,
             "{} names the shard '{}', which is not a file name in its directory", index.string(),
             name);
}

void write_text_atomic(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    WEFT_CHECK(out, "cannot create {}: {}", tmp.string(), std::strerror(errno));
    out << text;
    out.flush();
    if (!out) {
      const std::string err = std::strerror(errno);
      out.close();
      std::remove(tmp.c_str());
      WEFT_FAIL("cannot write {}: {}", tmp.string(), err);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    std::remove(tmp.c_str());
    WEFT_FAIL("cannot write {}: {}", path.string(), err);
  }
}

// GPT-2's byte-to-unicode alphabet: printable bytes stand for themselves,
// the others for the code points from 256 on, in byte order.
std::string byte_symbol(int byte) {
  auto printable = [](int b) {
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  };
  int code = byte;
  if (!printable(byte)) {
    code = 256;
    for (int b = 0; b < byte; ++b) code += printable(b) ? 0 : 1;
  }
  std::string utf8;
  if (code < 0x80) {
    utf8 += static_cast<char>(code);
  } else {
    utf8 += static_cast<char>(0xC0 | (code >> 6));
    utf8 += static_cast<char>(0x80 | (code & 0x3F));
  }
  return utf8;
}

}  // namespace

bool is_hf_directory(const std::string& dir) {
  std::error_code ec;
  const fs::path d(dir);
  if (!fs::is_directory(d, ec) || fs::exists(d / "index.json", ec)) return false;
  return fs::is_regular_file(d / kSingle, ec) || fs::is_regular_file(d / kIndex, ec);
}

HfModelFiles::HfModelFiles(const std::string& path) : path_(path) {
  std::error_code ec;
  const fs::path p(path);
  WEFT_CHECK(fs::exists(p, ec), "{} does not exist", path);
  std::vector<std::string> names;
  if (!fs::is_directory(p, ec)) {
    names.push_back(path);
    const fs::path config = p.parent_path() / "config.json";
    if (fs::is_regular_file(config, ec)) config_path_ = config.string();
  } else {
    const fs::path index = p / kIndex;
    if (fs::is_regular_file(index, ec)) {
      const Json j = parse_json(read_small_file(index, kMaxIndexBytes), index.string());
      WEFT_CHECK(j.is_object() && j.find("weight_map") && j.at("weight_map").is_object(),
                 "{} has no \"weight_map\" object: is it a Hugging Face index?", index.string());
      std::map<std::string, size_t> shard_of_file;
      std::map<std::string, std::string> expected;  // tensor -> shard
      for (const auto& [tensor, shard] : j.at("weight_map").as_object()) {
        WEFT_CHECK(shard.is_string(), "{}: the shard of {} is not a string", index.string(),
                   tensor);
        check_shard_name(shard.as_string(), index);
        WEFT_CHECK(expected.emplace(tensor, shard.as_string()).second, "{} names tensor {} twice",
                   index.string(), tensor);
        if (shard_of_file.emplace(shard.as_string(), names.size()).second) {
          names.push_back((p / shard.as_string()).string());
        }
      }
      WEFT_CHECK(!names.empty(), "{} names no tensors", index.string());
      for (const std::string& n : names) {
        WEFT_CHECK(fs::is_regular_file(n, ec), "{} names the shard {}, which is missing",
                   index.string(), fs::path(n).filename().string());
      }
      for (const std::string& n : names) files_.push_back(std::make_unique<SafetensorsFile>(n));
      for (const auto& [tensor, shard] : expected) {
        const size_t i = shard_of_file.at(shard);
        WEFT_CHECK(files_[i]->find(tensor), "{} puts {} in {}, but that shard does not hold it",
                   index.string(), tensor, shard);
      }
    } else {
      WEFT_CHECK(fs::is_regular_file(p / kSingle, ec),
                 "{} is a directory without {} or {}: give a Hugging Face model directory (as "
                 "save_pretrained writes) or a .safetensors file",
                 path, kSingle, kIndex);
      names.push_back((p / kSingle).string());
    }
    if (fs::is_regular_file(p / "config.json", ec)) config_path_ = (p / "config.json").string();
  }
  if (files_.empty()) files_.push_back(std::make_unique<SafetensorsFile>(names.front()));
  for (size_t i = 0; i < files_.size(); ++i) {
    for (const TensorInfo& t : files_[i]->tensors()) {
      WEFT_CHECK(where_.emplace(t.name, i).second, "{}: tensor {} is in both {} and {}", path,
                 t.name, files_[where_.at(t.name)]->path(), files_[i]->path());
    }
  }
}

std::vector<const TensorInfo*> HfModelFiles::tensors() const {
  std::vector<const TensorInfo*> out;
  for (const auto& f : files_) {
    for (const TensorInfo& t : f->tensors()) out.push_back(&t);
  }
  return out;
}

const SafetensorsFile* HfModelFiles::file_of(std::string_view name) const {
  auto it = where_.find(name);
  return it == where_.end() ? nullptr : files_[it->second].get();
}

const TensorInfo* HfModelFiles::find(std::string_view name) const {
  const SafetensorsFile* f = file_of(name);
  return f ? f->find(name) : nullptr;
}

const TensorInfo& HfModelFiles::info(std::string_view name) const {
  const TensorInfo* t = find(name);
  WEFT_CHECK(t, "{} has no tensor {}", path_, name);
  return *t;
}

Tensor HfModelFiles::load(std::string_view name) const {
  const SafetensorsFile* f = file_of(name);
  WEFT_CHECK(f, "{} has no tensor {}", path_, name);
  return f->load(name);
}

const std::map<std::string, std::string>& HfModelFiles::metadata() const {
  return files_.front()->metadata();
}

std::vector<std::string> write_hf_directory(const std::string& dir,
                                            std::span<const NamedTensor> tensors,
                                            const std::map<std::string, std::string>& metadata,
                                            const std::map<std::string, Json>& files,
                                            const HfDirectoryOptions& options) {
  WEFT_CHECK(options.max_shard_bytes > 0, "the shard size must be positive, got {}",
             options.max_shard_bytes);
  const fs::path d(dir);
  std::error_code ec;
  WEFT_CHECK(!fs::exists(d, ec) || fs::is_directory(d, ec),
             "cannot write a model directory to {}: it is a file (give a directory, or a name "
             "ending in .safetensors for a single file)",
             dir);
  WEFT_CHECK(!fs::exists(d / "index.json", ec),
             "{} is a weft checkpoint: export into another directory", dir);
  fs::create_directories(d, ec);
  WEFT_CHECK(!ec, "cannot create {}: {}", dir, ec.message());

  // Greedy shards in tensor order, as save_pretrained cuts them.
  std::vector<std::vector<NamedTensor>> shards(1);
  int64_t in_shard = 0, total = 0;
  for (const NamedTensor& t : tensors) {
    const int64_t bytes = t.tensor.nbytes();
    if (!shards.back().empty() && in_shard + bytes > options.max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(t);
    in_shard += bytes;
    total += bytes;
  }

  // Shards a previous save left here (its index names them).
  std::set<std::string> previous;
  if (fs::is_regular_file(d / kIndex, ec)) {
    try {
      const Json old = parse_json(read_small_file(d / kIndex, kMaxIndexBytes), kIndex);
      for (const auto& [tensor, shard] : old.at("weight_map").as_object()) {
        check_shard_name(shard.as_string(), d / kIndex);
        previous.insert(shard.as_string());
      }
    } catch (const Error&) {
      // A damaged old index names nothing we may delete.
    }
  }

  std::vector<std::string> written;
  if (shards.size() == 1) {
    write_safetensors((d / kSingle).string(), shards[0], metadata);
    written.push_back(kSingle);
    fs::remove(d / kIndex, ec);
  } else {
    Json weight_map = Json::object();
    const size_t n = shards.size();
    for (size_t i = 0; i < n; ++i) {
      char name[64];
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, n);
      write_safetensors((d / name).string(), shards[i], metadata);
      written.push_back(name);
      for (const NamedTensor& t : shards[i]) weight_map[t.name] = name;
    }
    Json index = Json::object();
    index["metadata"] = Json::object();
    index["metadata"]["total_size"] = total;
    index["weight_map"] = std::move(weight_map);
    write_text_atomic(d / kIndex, index.dump(2) + "\n");
    written.push_back(kIndex);
    fs::remove(d / kSingle, ec);
  }
  for (const auto& [name, json] : files) {
    write_text_atomic(d / name, json.dump(2) + "\n");
    written.push_back(name);
  }
  for (const std::string& old : previous) {
    if (std::find(written.begin(), written.end(), old) == written.end()) fs::remove(d / old, ec);
  }
  return written;
}

std::map<std::string, Json> byte_tokenizer_files(int64_t model_max_length) {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_symbol(b)] = b;
  auto byte_level = [] {
    Json j = Json::object();
    j["type"] = "ByteLevel";
    j["add_prefix_space"] = false;
    j["trim_offsets"] = false;
    j["use_regex"] = false;
    return j;
  };
  Json model = Json::object();
  model["type"] = "BPE";
  model["dropout"] = nullptr;
  model["unk_token"] = nullptr;
  model["continuing_subword_prefix"] = nullptr;
  model["end_of_word_suffix"] = nullptr;
  model["fuse_unk"] = false;
  model["byte_fallback"] = false;
  model["vocab"] = std::move(vocab);
  model["merges"] = Json::array();
  Json tokenizer = Json::object();
  tokenizer["version"] = "1.0";
  tokenizer["truncation"] = nullptr;
  tokenizer["padding"] = nullptr;
  tokenizer["added_tokens"] = Json::array();
  tokenizer["normalizer"] = nullptr;
  tokenizer["pre_tokenizer"] = byte_level();
  tokenizer["post_processor"] = nullptr;
  tokenizer["decoder"] = byte_level();
  tokenizer["model"] = std::move(model);

  // Byte 255 never occurs in UTF-8 text: it is the end-of-text token, as in
  // the exported config.json (eos_token_id = vocab - 1).
  Json config = Json::object();
  config["tokenizer_class"] = "PreTrainedTokenizerFast";
  config["model_max_length"] = model_max_length;
  config["eos_token"] = byte_symbol(255);
  config["clean_up_tokenization_spaces"] = false;
  return {{"tokenizer.json", std::move(tokenizer)}, {"tokenizer_config.json", std::move(config)}};
}

}  // namespace weft::io
