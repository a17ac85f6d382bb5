// ByteTokenizer: text <-> token ids, one token per byte (vocabulary 256).
//
// Byte-level tokenization needs no vocabulary file, never fails to encode and
// round-trips any byte string exactly (UTF-8 text becomes its bytes).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace weft::io {

class ByteTokenizer {
 public:
  static constexpr int32_t kVocabSize = 256;

  int32_t vocab_size() const { return kVocabSize; }
  // text -> ids in [0, 256), one per byte.
  std::vector<int32_t> encode(std::string_view text) const;
  // ids -> bytes; an id outside [0, 256) is a weft::Error naming it and its position.
  std::string decode(std::span<const int32_t> ids) const;
};

}  // namespace weft::io
