// The text data loader and tokenizer (train/data.h, train/tokenizer.h). The
// first bytes choose the mode and the sizes (sequence length, validation
// fraction, batch, data-parallel and batch-parallel ranks); the rest is the
// file: a --data text file (or anything not named .bin, which may still be a
// shard by its magic number) or a fortune file of the default corpus. The
// tokens are split into a Dataset, sampled and batched; the bytes go through
// the tokenizer and back, and as token ids through decode.
#include <cstring>
#include <filesystem>

#include "fuzz.h"
#include "weft/train/data.h"
#include "weft/train/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace wt = weft::train;
  weft::fuzz::Bytes in(data, size);
  const uint8_t mode = in.byte();
  const int64_t seq = in.in_range(1, 64);
  const double val_fraction = static_cast<double>(in.byte()) / 256.0;
  const int64_t batch = in.in_range(1, 8);
  wt::BatchSlice slice{.dp_rank = static_cast<int>(in.in_range(0, 3)),
                       .dp_size = static_cast<int>(in.in_range(1, 4)),
                       .sub_rank = static_cast<int>(in.in_range(0, 1)),
                       .sub_size = static_cast<int>(in.in_range(1, 2))};
  const int64_t step = in.in_range(0, 1000);
  const std::string_view text = in.rest();

  const std::string root = weft::fuzz::scratch_dir();
  std::string path;
  weft::fuzz::refused_ok([&] {
    wt::TokenData tokens;
    if (mode % 2 == 0) {
      path = root + "/data.txt";
      weft::fuzz::write_file(path, text);
      tokens = wt::load_tokens(path);
    } else {
      const std::string dir = root + "/fortunes";
      std::filesystem::create_directories(dir);
      weft::fuzz::write_file(dir + "/fortunes", text);
      weft::fuzz::write_file(dir + "/fortunes.dat", "not a fortune file");
      tokens = wt::default_corpus(dir);
    }
    if (tokens.format == wt::TokenData::Format::text) {
      const wt::ByteTokenizer tok;
      if (tok.decode(tokens.tokens).size() != tokens.tokens.size()) std::abort();
    }
    (void)tokens.vocab_needed();
    (void)tokens.fingerprint();
    const wt::Dataset ds(std::move(tokens), seq, val_fraction);
    if (ds.train().size() + ds.val().size() != ds.data().tokens.size()) std::abort();
    const int64_t batches = ds.val_batches(batch, 4);
    for (int64_t b = 0; b < batches; ++b) {
      weft::fuzz::refused_ok([&] { (void)ds.val_batch(b, batch, slice); });
    }
    const wt::Sampler sampler(ds, static_cast<uint64_t>(step) * 7919, batch);
    weft::fuzz::refused_ok([&] { (void)sampler.next_batch(step, 0, slice); });
    (void)sampler.global(step, 1);
  });

  // The tokenizer: bytes round-trip; ids outside [0, 256) are refused.
  const wt::ByteTokenizer tok;
  const std::vector<int32_t> ids = tok.encode(text);
  if (tok.decode(ids) != text) std::abort();
  std::vector<int32_t> raw(text.size() / 4);
  if (!raw.empty()) std::memcpy(raw.data(), text.data(), raw.size() * 4);
  weft::fuzz::refused_ok([&] { (void)tok.decode(raw); });
  return 0;
}
