// Decoders of tokenizer.json: ByteLevel, Metaspace, Replace, ByteFallback,
// Fuse, Strip, Sequence — each as Hugging Face's tokenizers applies it
// (decode_chain: tokens in, tokens out; the result is their concatenation).
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace weft::text {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// nullptr for JSON null; a type weft does not support is a weft::Error naming it.
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& spec);

}  // namespace weft::text
