// Tokenizer: a Hugging Face tokenizer.json — text to token ids and back,
// with the ids the `tokenizers` library gives.
//
// Encoding runs the library's pipeline: added tokens with "normalized": false
// are split out of the raw text; the rest is normalized, added tokens with
// "normalized": true are split out of that; the remaining parts are
// pre-tokenized and each pre-token goes through the BPE model (through an
// EncodeCache when one is given); the post-processor adds its special tokens
// (a BOS) when add_special_tokens is set, as encode(text) does by default.
// A component weft does not support is refused by name when the file is read
// (a weft::Error), never approximated.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace weft::text {

// Pre-token -> ids, for one thread at a time (each encoding thread keeps its
// own). Holds at most `capacity` entries: when full, it starts again empty.
class EncodeCache {
 public:
  explicit EncodeCache(size_t capacity = 1 << 18) : capacity_(capacity) {}
  const std::vector<int32_t>* find(const std::string& piece) const {
    auto it = map_.find(piece);
    return it == map_.end() ? nullptr : &it->second;
  }
  void insert(const std::string& piece, std::vector<int32_t> ids) {
    if (map_.size() >= capacity_) map_.clear();
    map_.emplace(piece, std::move(ids));
  }
  size_t size() const { return map_.size(); }

 private:
  size_t capacity_;
  std::unordered_map<std::string, std::vector<int32_t>> map_;
};

class Tokenizer {
 public:
  // The contents of a tokenizer.json; `source` names it in messages. Malformed
  // JSON, a missing field and an unsupported component are weft::Errors.
  static Tokenizer from_json(std::string_view json, const std::string& source = "tokenizer.json");
  // A tokenizer.json file, or a directory holding one.
  static Tokenizer from_file(const std::string& path);
  // The path of the tokenizer.json that `path` (a file or a directory) names;
  // a directory without one is a weft::Error.
  static std::string resolve_path(const std::string& path);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Text (UTF-8; anything else is a weft::Error naming the byte offset) to ids.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true,
                              EncodeCache* cache = nullptr) const;
  // Ids to text, through the decoder, as the library's decode(ids,
  // skip_special_tokens); an id outside the vocabulary is a weft::Error
  // naming it and its position.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // Largest id + 1 (the model's vocabulary and the added tokens).
  int32_t vocab_size() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // "" for an id that names no token.
  std::string id_to_token(int32_t id) const;
  bool is_special(int32_t id) const;
  // The ids the post-processor puts before and after a single sequence.
  const std::vector<int32_t>& prefix_ids() const;
  const std::vector<int32_t>& suffix_ids() const;
  // The JSON this tokenizer was read from, byte for byte.
  const std::string& json() const;
  const std::string& source() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft::text
