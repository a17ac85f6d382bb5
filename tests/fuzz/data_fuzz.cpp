// The data loader and tokenizer (train/data.h, train/tokenizer.h). The first
// bytes choose the mode and the sizes (sequence length, validation fraction,
// batch, data-parallel and batch-parallel ranks, step); the rest is up to
// three NUL-separated parts: a --data list, and files a.txt and b.txt (text,
// or shards by their magic number). The modes:
//   0: --data is the list (commas, globs), its items taken inside the
//      scratch directory (a '/' is dropped: no pattern reaches outside);
//   1: a.txt is a fortune file of the default corpus (with a .dat beside it);
//   2: a.txt is --data and b.txt --val-data (the two-file Dataset).
// The tokens are split into a Dataset, sampled and batched; the bytes go
// through the tokenizer and back, and as token ids through decode.
#include <cstring>
#include <filesystem>
#include <optional>

#include "fuzz.h"
#include "weft/io/data.h"
#include "weft/io/tokenizer.h"

namespace {

// "a.txt,*.txt" -> "DIR/a.txt,DIR/*.txt"
std::string data_list(std::string_view fuzzed, const std::string& dir) {
  std::string out;
  for (std::string_view item : weft::fuzz::split(fuzzed, ',', 64)) {
    if (!out.empty()) out += ',';
    out += dir + '/';
    for (char c : item)
      if (c != '/') out += c;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::fuzz::Bytes in(data, size);
  const uint8_t mode = in.byte() % 3;
  const int64_t seq = in.in_range(1, 64);
  const double val_fraction = static_cast<double>(in.byte()) / 256.0;
  const int64_t batch = in.in_range(1, 8);
  weft::io::BatchSlice slice{.dp_rank = static_cast<int>(in.in_range(0, 3)),
                             .dp_size = static_cast<int>(in.in_range(1, 4)),
                             .sub_rank = static_cast<int>(in.in_range(0, 1)),
                             .sub_size = static_cast<int>(in.in_range(1, 2))};
  const int64_t step = in.in_range(0, 1000);
  const auto parts = weft::fuzz::split(in.rest(), '\0', 3);
  const std::string_view a = parts.size() > 1 ? parts[1] : std::string_view();
  const std::string_view b = parts.size() > 2 ? parts[2] : std::string_view();

  const std::string dir = weft::fuzz::scratch_dir() + "/data";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  weft::fuzz::write_file(dir + "/a.txt", a);
  weft::fuzz::write_file(dir + "/b.txt", b);

  weft::fuzz::refused_ok([&] {
    std::optional<weft::io::Dataset> ds;
    if (mode == 0) {
      const std::string list = data_list(parts[0], dir);
      (void)weft::io::expand_data_paths(list);
      (void)weft::io::data_format(list);
      ds.emplace(weft::io::load_token_files(list), seq, val_fraction);
    } else if (mode == 1) {
      weft::fuzz::write_file(dir + "/fortunes", a);
      weft::fuzz::write_file(dir + "/fortunes.dat", "not a fortune file");
      std::filesystem::remove(dir + "/a.txt");
      std::filesystem::remove(dir + "/b.txt");
      ds.emplace(weft::io::default_corpus(dir), seq, val_fraction);
    } else {
      ds.emplace(weft::io::load_tokens(dir + "/a.txt"), weft::io::load_tokens(dir + "/b.txt"), seq);
    }
    const weft::io::TokenData& tokens = ds->data();
    (void)weft::io::tokenizer_vocab(tokens.format);
    if (tokens.format == weft::io::TokenData::Format::text) {
      const weft::io::ByteTokenizer tok;
      if (tok.decode(tokens.tokens).size() != tokens.tokens.size()) std::abort();
    }
    (void)tokens.vocab_needed();
    (void)tokens.fingerprint();
    if (ds->train().size() + ds->val().size() != tokens.tokens.size()) std::abort();
    const int64_t batches = ds->val_batches(batch, 4);
    for (int64_t i = 0; i < batches; ++i) {
      weft::fuzz::refused_ok([&] { (void)ds->val_batch(i, batch, slice); });
    }
    const weft::io::Sampler sampler(*ds, static_cast<uint64_t>(step) * 7919, batch);
    weft::fuzz::refused_ok([&] { (void)sampler.next_batch(step, 0, slice); });
    (void)sampler.global(step, 1);
  });

  // The tokenizer: bytes round-trip; ids outside [0, 256) are refused.
  const weft::io::ByteTokenizer tok;
  const std::vector<int32_t> ids = tok.encode(a);
  if (tok.decode(ids) != a) std::abort();
  std::vector<int32_t> raw(a.size() / 4);
  if (!raw.empty()) std::memcpy(raw.data(), a.data(), raw.size() * 4);
  weft::fuzz::refused_ok([&] { (void)tok.decode(raw); });
  return 0;
}
