#include "weft/io/checkpoint_tokenizer.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "weft/core/error.h"
#include "weft/io/checkpoint_dir.h"
#include "weft/io/checkpoint_format.h"
#include "weft/io/checksum.h"
#include "weft/io/hf_tokenizer.h"

namespace fs = std::filesystem;

namespace weft::io {

namespace {

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  WEFT_CHECK(in.good(), "cannot read {}", path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Json tokenizer_index_entry(const std::string& json) {
  Json entry = Json::object();
  entry["file"] = kTokenizerFile;
  entry["xxh3"] = checksum_hex(xxh3(json));
  return entry;
}

std::string checkpoint_tokenizer(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return "";  // a .safetensors file carries none
  const fs::path dir = resolve_checkpoint(path);
  const fs::path index_path = dir / "index.json";
  if (!fs::exists(index_path, ec)) return "";
  bool sealed = false;
  const Json index = parse_sealed_json(read_all(index_path), index_path.string(), sealed);
  if (!index.is_object() || !index.find("tokenizer")) return "";
  const Json& entry = index.at("tokenizer");
  WEFT_CHECK(entry.is_object() && entry.find("file") && entry.find("xxh3") &&
                 entry.at("file").is_string() && entry.at("file").as_string() == kTokenizerFile,
             "{}: the \"tokenizer\" entry is malformed", index_path.string());
  const fs::path file = dir / kTokenizerFile;
  WEFT_CHECK(fs::exists(file, ec), "{} lists {} but it is missing; the checkpoint is incomplete",
             index_path.string(), file.string());
  std::string text = read_all(file);
  const std::string got = checksum_hex(xxh3(text));
  WEFT_CHECK(
      entry.at("xxh3").is_string() && got == entry.at("xxh3").as_string(),
      "{} does not match its checksum in index.json (xxh3 {} there, {} read): the file is damaged",
      file.string(), entry.at("xxh3").is_string() ? entry.at("xxh3").as_string() : "?", got);
  return text;
}

std::string model_tokenizer(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return "";
  if (fs::exists(fs::path(path) / "config.json", ec) &&
      !fs::exists(fs::path(path) / "index.json", ec))
    return hf_directory_tokenizer(path, INT64_MAX);
  return checkpoint_tokenizer(path);
}

}  // namespace weft::io
