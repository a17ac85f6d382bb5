// Normalizers of tokenizer.json: Prepend, Replace, Lowercase, NFC, NFD,
// NFKC, NFKD, Strip, Sequence — each as Hugging Face's tokenizers applies it.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace weft::text {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& s) const = 0;
};

// The normalizer `spec` describes (nullptr for JSON null); a type weft does not
// support is a weft::Error naming it.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& spec);

}  // namespace weft::text
