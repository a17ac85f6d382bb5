// The llm.c token shard reader (train/data.h): the input is a .bin file, a
// GPT-2 shard (version 1, uint16 tokens) or a llama-3 shard (version 7,
// uint32 tokens) by its magic number. Loads it, then splits and samples it
// as training does.
#include "fuzz.h"
#include "weft/io/data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = weft::fuzz::scratch_dir() + "/tokens.bin";
  weft::fuzz::write_file(path, {reinterpret_cast<const char*>(data), size});
  weft::fuzz::refused_ok([&] {
    if (weft::io::data_format(path) == weft::io::TokenData::Format::text)
      std::abort();  // .bin: a shard
    weft::io::TokenData tokens = weft::io::load_tokens(path);
    if (tokens.format == weft::io::TokenData::Format::text || tokens.size() == 0) std::abort();
    for (int32_t t : tokens.tokens)
      if (t < 0) std::abort();  // token ids index the embedding
    (void)tokens.vocab_needed();
    (void)weft::io::tokenizer_vocab(tokens.format);
    (void)tokens.fingerprint();
    const weft::io::Dataset ds(std::move(tokens), 4, 0.1);
    const weft::io::Sampler sampler(ds, 1, 2);
    (void)sampler.next_batch(0, 0, {});
    (void)ds.val_batch(ds.val_batches(2, 4) - 1, 2);
  });
  return 0;
}
