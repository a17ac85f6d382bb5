// The added tokens of tokenizer.json ("added_tokens": special and other
// tokens split out of the text before the model sees it), matched as Hugging
// Face's AddedVocabulary does: leftmost-longest, with single_word, lstrip and
// rstrip; tokens with "normalized": false are matched in the raw text, the
// others in the normalized text (their own content normalized too).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace weft::text {

class Normalizer;

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

std::vector<AddedToken> parse_added_tokens(const nlohmann::json& spec);

// A part of a text: [begin, end) and the added token it is, or -1.
struct Chunk {
  size_t begin, end;
  int32_t id;
};

// The tokens of one set (normalized or not), matched in a string.
class AddedMatcher {
 public:
  AddedMatcher() = default;
  // `patterns[k]` is what token `tokens[k]` matches (its content, normalized
  // where the token is).
  AddedMatcher(std::vector<AddedToken> tokens, std::vector<std::string> patterns);
  bool empty() const { return tokens_.empty(); }
  // The parts of `s` (non-empty ones; all of `s` when nothing matches).
  std::vector<Chunk> split(std::string_view s) const;

 private:
  std::vector<AddedToken> tokens_;
  std::vector<std::string> patterns_;
  std::vector<std::vector<uint32_t>> by_first_byte_;  // 256 lists of token indices
};

}  // namespace weft::text
