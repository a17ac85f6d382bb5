// Encoding arbitrary bytes with the tokenizers of tests/text/data (the first
// byte picks one): text that is not UTF-8 is a weft::Error; UTF-8 text gives
// ids inside the vocabulary, and the byte-level tokenizers (GPT-2 and Llama-3
// style) decode them back to exactly the text.
#include <memory>

#include "fuzz.h"
#include "weft/text/tokenizer.h"

namespace {

const weft::text::Tokenizer& tokenizer(int which) {
  static const char* const names[] = {"gpt2", "llama3", "llama2"};
  static std::unique_ptr<weft::text::Tokenizer> loaded[3];
  if (!loaded[which])
    loaded[which] = std::make_unique<weft::text::Tokenizer>(weft::text::Tokenizer::from_file(
        std::string(WEFT_TEXT_DATA) + "/" + names[which] + ".json"));
  return *loaded[which];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int which = data[0] % 3;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const weft::text::Tokenizer& tok = tokenizer(which);
  weft::fuzz::refused_ok([&] {
    std::vector<int32_t> ids = tok.encode(text);
    for (const int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size()) std::abort();
    const std::string back = tok.decode(ids);
    if (which == 0 && back != text) std::abort();
    if (which == 1) {
      // Llama-3 style: the BOS first, then the text's own tokens.
      if (ids.empty() || ids[0] != tok.prefix_ids().at(0)) std::abort();
      ids.erase(ids.begin());
      if (tok.decode(ids) != text) std::abort();
    }
  });
  return 0;
}
