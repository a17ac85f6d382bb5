// Pre-tokenizers of tokenizer.json: ByteLevel (with or without GPT-2's regex,
// add_prefix_space), Split (regex or string, every behavior, invert),
// Metaspace, Digits, Punctuation, Whitespace, WhitespaceSplit, Sequence — each
// as Hugging Face's tokenizers applies it.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "weft/text/split.h"

namespace weft::text {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Sends the parts of `piece` to `out`, in order.
  virtual void pre_tokenize(Piece piece, const PieceSink& out) const = 0;
};

// nullptr for JSON null; a type weft does not support is a weft::Error naming it.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& spec);

// GPT-2's pre-tokenization regex (ByteLevel's use_regex).
inline constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace weft::text
