#include "weft/train/run_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "weft/core/error.h"
#include "weft/io/checkpoint_tokenizer.h"
#include "weft/io/data_prepare.h"
#include "weft/text/tokenizer.h"

namespace weft::train {

std::string find_run_tokenizer(const TrainConfig& cfg, std::string& where) {
  // A resumed run's saved --tokenizer path may be gone: its checkpoint's copy
  // is the same file.
  std::error_code ec;
  const bool given = !cfg.tokenizer.empty();
  if (given && !std::filesystem::exists(cfg.tokenizer, ec) && !cfg.resume.empty()) {
    if (std::string json = io::checkpoint_tokenizer(cfg.resume); !json.empty()) {
      where = cfg.resume;
      return json;
    }
  }
  if (given) {
    const text::Tokenizer tok = text::Tokenizer::from_file(cfg.tokenizer);
    where = tok.source();
    return tok.json();
  }
  if (!cfg.data.empty()) {
    const std::string beside = io::tokenizer_beside(cfg.data);
    if (!beside.empty()) {
      const text::Tokenizer tok = text::Tokenizer::from_file(beside);
      where = beside;
      return tok.json();
    }
  }
  for (const std::string* dir : {&cfg.resume, &cfg.init}) {
    if (dir->empty()) continue;
    std::string json = io::checkpoint_tokenizer(*dir);
    if (json.empty()) continue;
    text::Tokenizer::from_json(json, *dir + "/tokenizer.json");
    where = *dir;
    return json;
  }
  where.clear();
  return "";
}

std::vector<int32_t> encode_prompt(const text::Tokenizer& tok, const std::string& text) {
  std::vector<int32_t> ids = tok.encode(text, true);
  if (ids.empty()) {
    for (const char* eot : {"<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>"}) {
      if (auto id = tok.token_to_id(eot)) return {*id};
    }
    ids.push_back(0);
  }
  return ids;
}

std::string decode_generated(const text::Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::vector<int32_t> known;
  known.reserve(ids.size());
  for (const int32_t id : ids)
    if (id >= 0 && id < tok.vocab_size() && !tok.id_to_token(id).empty()) known.push_back(id);
  return tok.decode(known, true);
}

}  // namespace weft::train
