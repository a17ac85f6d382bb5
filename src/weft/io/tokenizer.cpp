#include "weft/io/tokenizer.h"

#include "weft/core/error.h"

namespace weft::io {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    WEFT_CHECK(ids[i] >= 0 && ids[i] < kVocabSize,
               "token id {} at position {} is outside the byte vocabulary [0, {}): the byte "
               "tokenizer decodes only ids a vocabulary-256 model produces",
               ids[i], i, kVocabSize);
    text[i] = static_cast<char>(static_cast<unsigned char>(ids[i]));
  }
  return text;
}

}  // namespace weft::io
