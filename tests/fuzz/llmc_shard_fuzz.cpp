// The llm.c token shard reader (train/data.h): the input is a .bin file, a
// GPT-2 shard (version 1, uint16 tokens) or a llama-3 shard (version 7,
// uint32 tokens) by its magic number. Loads it, then splits and samples it
// as training does.
#include "fuzz.h"
#include "weft/train/data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace wt = weft::train;
  const std::string path = weft::fuzz::scratch_dir() + "/tokens.bin";
  weft::fuzz::write_file(path, {reinterpret_cast<const char*>(data), size});
  weft::fuzz::refused_ok([&] {
    if (wt::data_format(path) == wt::TokenData::Format::text) std::abort();  // .bin: a shard
    wt::TokenData tokens = wt::load_tokens(path);
    if (tokens.format == wt::TokenData::Format::text || tokens.size() == 0) std::abort();
    for (int32_t t : tokens.tokens)
      if (t < 0) std::abort();  // token ids index the embedding
    (void)tokens.vocab_needed();
    (void)wt::tokenizer_vocab(tokens.format);
    (void)tokens.fingerprint();
    const wt::Dataset ds(std::move(tokens), 4, 0.1);
    const wt::Sampler sampler(ds, 1, 2);
    (void)sampler.next_batch(0, 0, {});
    (void)ds.val_batch(ds.val_batches(2, 4) - 1, 2);
  });
  return 0;
}
