// The BPE model of tokenizer.json: a vocabulary, merges with ranks (earlier
// merges first), unk_token with fuse_unk, byte_fallback (<0xHH> tokens) and
// ignore_merges — the algorithm of Hugging Face's tokenizers (word.rs
// merge_all: the lowest-ranked pair, leftmost first, until none applies).
// continuing_subword_prefix, end_of_word_suffix and dropout are refused.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace weft::text {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class Bpe {
 public:
  explicit Bpe(const nlohmann::json& spec);

  // Appends the ids of one pre-token (non-empty UTF-8) to `out`.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // "" when `id` is not in the vocabulary.
  const std::string& id_to_token(int32_t id) const;
  // Largest id + 1.
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }

 private:
  struct Merge {
    int32_t rank, id;
  };
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  const Merge* merge(int32_t a, int32_t b) const {
    auto it = merges_.find(key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  }

  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> vocab_;
  std::vector<std::string> tokens_;  // id -> token ("" for holes)
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<int32_t> unk_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  int32_t byte_ids_[256];  // <0xHH> ids, -1 where absent
  bool all_bytes_ = false;
};

}  // namespace weft::text
