#include "weft/io/hf_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "weft/core/error.h"
#include "weft/text/tokenizer.h"

namespace fs = std::filesystem;

namespace weft::io {

namespace {

// special_tokens_map.json: bos, eos, unk as named above.
Json special_tokens(const text::Tokenizer& tok) {
  Json special = Json::object();
  std::string eos;
  for (const char* name : {"<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>"}) {
    if (tok.token_to_id(name)) {
      eos = name;
      break;
    }
  }
  if (!tok.prefix_ids().empty())
    special["bos_token"] = tok.id_to_token(tok.prefix_ids().front());
  else if (eos == "<|endoftext|>")
    special["bos_token"] = eos;
  if (!eos.empty()) special["eos_token"] = eos;
  if (tok.token_to_id("<unk>")) special["unk_token"] = "<unk>";
  return special;
}

}  // namespace

void set_special_token_ids(const std::string& tokenizer_json, Json& config) {
  const text::Tokenizer tok =
      text::Tokenizer::from_json(tokenizer_json, "the checkpoint's tokenizer.json");
  const Json special = special_tokens(tok);
  for (const char* key : {"bos_token", "eos_token"}) {
    if (const Json* name = special.find(key))
      config[std::string(key) + "_id"] = static_cast<int64_t>(*tok.token_to_id(name->as_string()));
  }
}

std::map<std::string, Json> hf_tokenizer_files(const std::string& tokenizer_json,
                                               int64_t model_max_length) {
  const text::Tokenizer tok =
      text::Tokenizer::from_json(tokenizer_json, "the checkpoint's tokenizer.json");
  Json special = special_tokens(tok);
  Json config = Json::object();
  config["tokenizer_class"] = "PreTrainedTokenizerFast";
  config["model_max_length"] = model_max_length;
  config["clean_up_tokenization_spaces"] = false;
  for (const auto& [key, value] : special.as_object()) config[key] = value;
  return {{"tokenizer.json", parse_json(tokenizer_json, "the checkpoint's tokenizer.json")},
          {"tokenizer_config.json", std::move(config)},
          {"special_tokens_map.json", std::move(special)}};
}

std::string hf_directory_tokenizer(const std::string& path, int64_t vocab) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return "";
  const fs::path file = fs::path(path) / "tokenizer.json";
  if (!fs::is_regular_file(file, ec)) return "";
  std::ifstream in(file, std::ios::binary);
  WEFT_CHECK(in.good(), "cannot read {}", file.string());
  std::stringstream ss;
  ss << in.rdbuf();
  const text::Tokenizer tok = text::Tokenizer::from_json(ss.str(), file.string());
  WEFT_CHECK(tok.vocab_size() <= vocab, "{} has {} tokens, more than the model's vocabulary of {}",
             file.string(), tok.vocab_size(), vocab);
  return tok.json();
}

}  // namespace weft::io
