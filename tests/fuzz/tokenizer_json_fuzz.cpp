// tokenizer.json (text/tokenizer.h): any bytes either make a tokenizer or are
// a weft::Error; a tokenizer that loads encodes and decodes a fixed text
// (every id inside its vocabulary) without anything but a weft::Error.
#include "fuzz.h"
#include "weft/text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  weft::fuzz::refused_ok([&] {
    const weft::text::Tokenizer tok = weft::text::Tokenizer::from_json(text, "fuzz input");
    const std::vector<int32_t> ids = tok.encode("Hello, world! 123 héllo  \n\t<s>x</s> ▁end");
    for (const int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size()) std::abort();
    tok.decode(ids);
    tok.decode(ids, true);
  });
  return 0;
}
