#include "weft/io/data.h"

#include <glob.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>

#include "weft/io/tokenizer.h"
#include "weft/kernels/random.h"

namespace weft::io {

namespace fs = std::filesystem;

int32_t TokenData::vocab_needed() const {
  int32_t top = -1;
  for (int32_t t : tokens) top = std::max(top, t);
  return top + 1;
}

uint64_t TokenData::fingerprint() const {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : tokens) {
    uint32_t u = static_cast<uint32_t>(t);
    for (int b = 0; b < 4; ++b) h = (h ^ ((u >> (8 * b)) & 0xffu)) * 1099511628211ull;
  }
  return h;
}

namespace {

// What a path that exists but is not a regular file is, for the error that
// refuses it: reading a FIFO would wait for a writer, a character device
// (/dev/zero) would never end.
const char* kind_of(fs::file_type t) {
  switch (t) {
    case fs::file_type::directory: return "a directory";
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::character: return "a character device";
    case fs::file_type::block: return "a block device";
    case fs::file_type::socket: return "a socket";
    default: return "not a regular file";
  }
}

// Refuses a data path that exists and is not a regular file (after
// symlinks) before anything opens it; a missing file is the opener's error.
void require_regular_file(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st) || fs::is_regular_file(st)) return;
  WEFT_FAIL("data file {} is {}; pass a regular text file or an llm.c .bin shard to --data", path,
            kind_of(st.type()));
}

std::string read_file(const std::string& path) {
  require_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  WEFT_CHECK(in.good(), "cannot open data file {}: {}; pass an existing --data file", path,
             std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  WEFT_CHECK(!in.bad(), "cannot read data file {}: {}", path, std::strerror(errno));
  return bytes;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

TokenData parse_shard(const std::string& path, const std::string& bytes) {
  constexpr int64_t kHeaderBytes = kShardHeaderInts * 4;
  const int64_t size = static_cast<int64_t>(bytes.size());
  int32_t magic = 0;
  if (size >= 4) std::memcpy(&magic, bytes.data(), 4);
  WEFT_CHECK(magic == kShardMagic || magic == kShardMagicU32,
             "{} is not an llm.c token shard: its magic number is {}, expected {} (GPT-2 tokens) "
             "or {} (llama-3 tokens); a .bin --data file must be a shard from llm.c's data "
             "scripts (give text files another extension)",
             path, magic, kShardMagic, kShardMagicU32);
  WEFT_CHECK(size >= kHeaderBytes,
             "{} is truncated: an llm.c token shard starts with a {}-byte header, the file has {} "
             "bytes",
             path, kHeaderBytes, size);
  std::array<int32_t, 3> header{};
  std::memcpy(header.data(), bytes.data(), sizeof header);
  const bool wide = magic == kShardMagicU32;
  const int32_t version = wide ? kShardVersionU32 : kShardVersion;
  WEFT_CHECK(header[1] == version,
             "{} is an llm.c token shard (magic {}) of version {}; weft reads version {} ({} "
             "tokens)",
             path, magic, header[1], version, wide ? "uint32" : "uint16");
  const int64_t count = header[2];
  const int64_t width = wide ? 4 : 2;
  WEFT_CHECK(count >= 0, "{} is corrupted: its header gives a negative token count {}", path,
             count);
  const int64_t have = size - kHeaderBytes;
  WEFT_CHECK(have >= width * count,
             "{} is truncated: header says {} tokens ({} bytes), file has {} bytes of tokens", path,
             count, width * count, have);
  WEFT_CHECK(have == width * count,
             "{} is corrupted: header says {} tokens ({} bytes) but {} bytes follow the header",
             path, count, width * count, have);
  WEFT_CHECK(count > 0, "data file {} holds no tokens; pass a --data file with tokens", path);
  TokenData data;
  data.source = path;
  data.format = wide ? TokenData::Format::shard_u32 : TokenData::Format::shard;
  data.tokens.resize(static_cast<size_t>(count));
  const char* p = bytes.data() + kHeaderBytes;
  for (int64_t i = 0; i < count; ++i) {
    if (wide) {
      uint32_t t;
      std::memcpy(&t, p + 4 * i, 4);
      WEFT_CHECK(t <= static_cast<uint32_t>(INT32_MAX),
                 "{} is corrupted: token {} is {}, beyond any vocabulary", path, i, t);
      data.tokens[static_cast<size_t>(i)] = static_cast<int32_t>(t);
    } else {
      uint16_t t;
      std::memcpy(&t, p + 2 * i, 2);
      data.tokens[static_cast<size_t>(i)] = t;
    }
  }
  return data;
}

// What a file that is not text looks like, from its first bytes ("" when it
// may be text).
std::string binary_kind(const std::string& bytes) {
  auto starts = [&](std::string_view magic) { return std::string_view(bytes).starts_with(magic); };
  if (starts("\x1f\x8b")) return "a gzip-compressed file: decompress it first (gunzip)";
  if (starts("\x28\xb5\x2f\xfd")) return "a zstd-compressed file: decompress it first (unzstd)";
  if (starts(std::string_view("\xfd"
                              "7zXZ\0",
                              6)))
    return "an xz-compressed file: decompress it first (unxz)";
  if (starts("BZh")) return "a bzip2-compressed file: decompress it first (bunzip2)";
  if (starts("PK\x03\x04")) return "a zip archive: extract it first";
  if (starts("\x93NUMPY")) return "a NumPy array file: write it as an llm.c shard";
  if (bytes.size() >= 9) {
    uint64_t header = 0;
    std::memcpy(&header, bytes.data(), 8);
    if (header > 0 && header <= bytes.size() - 8 && bytes[8] == '{') {
      return "a safetensors file (model weights), not training data";
    }
  }
  const size_t probe = std::min<size_t>(bytes.size(), 1 << 16);
  if (std::memchr(bytes.data(), '\0', probe)) return "binary data (it has NUL bytes), not text";
  return "";
}

}  // namespace

TokenData text_tokens(std::string_view text, std::string source) {
  TokenData data;
  data.tokens = ByteTokenizer().encode(text);
  data.source = std::move(source);
  data.format = TokenData::Format::text;
  return data;
}

TokenData load_tokens(const std::string& path) {
  const std::string bytes = read_file(path);
  WEFT_CHECK(!bytes.empty(),
             "data file {} is empty; pass a --data file with text or an llm.c .bin shard", path);
  int32_t magic = 0;
  if (bytes.size() >= 4) std::memcpy(&magic, bytes.data(), 4);
  if (magic == kShardMagic || magic == kShardMagicU32 || ends_with(path, ".bin")) {
    return parse_shard(path, bytes);
  }
  const std::string kind = binary_kind(bytes);
  WEFT_CHECK(kind.empty(),
             "data file {} looks like {}; --data takes text or llm.c token shards (.bin)", path,
             kind);
  return text_tokens(bytes, path);
}

std::vector<std::string> expand_data_paths(const std::string& spec) {
  std::vector<std::string> paths;
  size_t begin = 0;
  while (begin <= spec.size()) {
    size_t comma = spec.find(',', begin);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(begin, comma - begin);
    begin = comma + 1;
    WEFT_CHECK(!item.empty(), "the data list '{}' has an empty entry; separate files with commas",
               spec);
    if (item.find_first_of("*?[") == std::string::npos) {
      paths.push_back(item);
      continue;
    }
    glob_t g{};
    const int rc = ::glob(item.c_str(), GLOB_ERR, nullptr, &g);
    std::vector<std::string> matches(g.gl_pathv, g.gl_pathv + (rc == 0 ? g.gl_pathc : 0));
    ::globfree(&g);
    WEFT_CHECK(rc == 0 && !matches.empty(), "the data pattern '{}' matches no file", item);
    paths.insert(paths.end(), matches.begin(), matches.end());
  }
  return paths;
}

TokenData::Format data_format(const std::string& spec) {
  const std::string first = expand_data_paths(spec).front();
  require_regular_file(first);
  std::ifstream in(first, std::ios::binary);
  int32_t magic = 0;
  in.read(reinterpret_cast<char*>(&magic), 4);
  if (magic == kShardMagicU32) return TokenData::Format::shard_u32;
  if (magic == kShardMagic || ends_with(first, ".bin")) return TokenData::Format::shard;
  return TokenData::Format::text;
}

TokenData load_token_files(const std::string& spec) {
  const std::vector<std::string> paths = expand_data_paths(spec);
  if (paths.size() == 1) return load_tokens(paths[0]);
  TokenData all;
  for (size_t i = 0; i < paths.size(); ++i) {
    WEFT_CHECK(std::find(paths.begin(), paths.begin() + static_cast<long>(i), paths[i]) ==
                   paths.begin() + static_cast<long>(i),
               "the data file {} is named twice in '{}'", paths[i], spec);
    TokenData one = load_tokens(paths[i]);
    if (i == 0) {
      all.format = one.format;
    } else {
      WEFT_CHECK(one.format == all.format,
                 "{} and {} hold different kinds of data (text, GPT-2 or llama-3 shards); pass "
                 "files of one kind",
                 paths[0], paths[i]);
    }
    all.tokens.insert(all.tokens.end(), one.tokens.begin(), one.tokens.end());
  }
  all.source = format("{} files ({} .. {})", paths.size(), paths.front(), paths.back());
  return all;
}

int64_t tokenizer_vocab(TokenData::Format format) {
  switch (format) {
    case TokenData::Format::text: return ByteTokenizer::kVocabSize;
    case TokenData::Format::shard: return kGpt2Vocab;
    case TokenData::Format::shard_u32: return kLlama3Vocab;
  }
  return ByteTokenizer::kVocabSize;
}

void write_token_shard(const std::string& path, std::span<const uint16_t> tokens) {
  WEFT_CHECK(tokens.size() <= static_cast<size_t>(INT32_MAX),
             "an llm.c shard holds at most {} tokens, not {}", INT32_MAX, tokens.size());
  std::array<int32_t, kShardHeaderInts> header{};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  WEFT_CHECK(out.good(), "cannot create {}: {}", path, std::strerror(errno));
  out.write(reinterpret_cast<const char*>(header.data()), sizeof header);
  out.write(reinterpret_cast<const char*>(tokens.data()),
            static_cast<std::streamsize>(tokens.size_bytes()));
  out.close();
  WEFT_CHECK(!out.fail(), "cannot write {}: {}", path, std::strerror(errno));
}

std::string default_corpus_text(const std::string& dir) {
  auto missing = [&](std::string_view why) {
    return format(
        "the default corpus is Debian's fortunes package, but {} {}; install it with `apt-get "
        "install fortunes` (scripts/install-deps.sh and `make train` do) or pass --data FILE",
        dir, why);
  };
  std::error_code ec;
  WEFT_CHECK(fs::is_directory(dir, ec), "{}", missing("does not exist"));
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const fs::path& p = e.path();
    if (e.is_symlink() || !e.is_regular_file()) continue;
    if (p.extension() == ".dat" || p.extension() == ".u8") continue;
    files.push_back(p);
  }
  WEFT_CHECK(!ec, "cannot list {}: {}", dir, ec.message());
  WEFT_CHECK(!files.empty(), "{}", missing("holds no fortune files"));
  std::sort(files.begin(), files.end());

  std::string corpus;
  for (const fs::path& p : files) {
    const std::string text = read_file(p.string());
    std::string entry;
    auto flush = [&] {
      if (entry.empty()) return;
      if (!corpus.empty()) corpus += '\n';
      corpus += entry;
      entry.clear();
    };
    size_t pos = 0;
    while (pos < text.size()) {
      size_t eol = text.find('\n', pos);
      if (eol == std::string::npos) eol = text.size();
      std::string_view line(text.data() + pos, eol - pos);
      if (line == "%" || line == "%\r") {
        flush();
      } else {
        entry.append(line);
        entry += '\n';
      }
      pos = eol + 1;
    }
    flush();
  }
  return corpus;
}

TokenData default_corpus(const std::string& dir) {
  return text_tokens(default_corpus_text(dir), format("the fortunes corpus ({})", dir));
}

std::pair<int64_t, int64_t> BatchSlice::rows(int64_t global_batch) const {
  WEFT_CHECK(dp_size >= 1 && dp_rank >= 0 && dp_rank < dp_size && sub_size >= 1 && sub_rank >= 0 &&
                 sub_rank < sub_size,
             "batch slice of data-parallel rank {} of {}, part {} of {} is not a valid rank",
             dp_rank, dp_size, sub_rank, sub_size);
  WEFT_CHECK(global_batch % dp_size == 0,
             "the global batch of {} samples does not split evenly over {} data-parallel ranks; "
             "use a batch that is a multiple of {}",
             global_batch, dp_size, dp_size);
  const int64_t local = global_batch / dp_size;
  WEFT_CHECK(local % sub_size == 0,
             "a data-parallel rank's {} samples do not split evenly over {} tensor-parallel ranks "
             "(batch-sequence parallelism); use a global batch that is a multiple of {}",
             local, sub_size, static_cast<int64_t>(dp_size) * sub_size);
  const int64_t part = local / sub_size;
  const int64_t begin = dp_rank * local + sub_rank * part;
  return {begin, begin + part};
}

Batch slice(const Batch& global, const BatchSlice& s) {
  auto [begin, end] = s.rows(global.size());
  return {global.inputs.narrow(begin, end - begin).clone(),
          global.targets.narrow(begin, end - begin).clone()};
}

Dataset::Dataset(TokenData data, int64_t seq_len, double val_fraction)
    : data_(std::move(data)), seq_(seq_len) {
  WEFT_CHECK(seq_len >= 1, "sequence length {} must be at least 1", seq_len);
  WEFT_CHECK(val_fraction > 0 && val_fraction < 1,
             "validation fraction {} must lie strictly between 0 and 1", val_fraction);
  const int64_t n = data_.size();
  const int64_t need = 2 * (seq_ + 1);
  WEFT_CHECK(n >= need,
             "{} has {} tokens; need at least 2·(seq+1) = {} for seq {} (a training and a "
             "validation window); pass a larger --data file",
             data_.source, n, need, seq_);
  const int64_t val =
      std::max(static_cast<int64_t>(static_cast<double>(n) * val_fraction), seq_ + 1);
  train_size_ = n - std::min(val, n - (seq_ + 1));
}

Dataset::Dataset(TokenData train, TokenData val, int64_t seq_len) : seq_(seq_len) {
  WEFT_CHECK(seq_len >= 1, "sequence length {} must be at least 1", seq_len);
  WEFT_CHECK(train.size() >= seq_ + 1,
             "{} has {} tokens; training needs at least seq+1 = {}; pass a larger --data file",
             train.source, train.size(), seq_ + 1);
  WEFT_CHECK(val.size() >= seq_ + 1,
             "{} has {} tokens; validation needs at least seq+1 = {}; pass a larger --val-data "
             "file",
             val.source, val.size(), seq_ + 1);
  WEFT_CHECK(train.format == val.format,
             "{} and {} hold different kinds of data (text, GPT-2 or llama-3 shards)", train.source,
             val.source);
  train_size_ = train.size();
  data_ = std::move(train);
  data_.source = format("{} (validation: {})", data_.source, val.source);
  data_.tokens.insert(data_.tokens.end(), val.tokens.begin(), val.tokens.end());
}

std::span<const int32_t> Dataset::train() const {
  return std::span<const int32_t>(data_.tokens).first(static_cast<size_t>(train_size_));
}

std::span<const int32_t> Dataset::val() const {
  return std::span<const int32_t>(data_.tokens).subspan(static_cast<size_t>(train_size_));
}

Batch Dataset::gather(std::span<const int32_t> tokens, std::span<const int64_t> starts) const {
  const int64_t n = static_cast<int64_t>(starts.size());
  Batch b{Tensor::empty({n, seq_}, DType::i32), Tensor::empty({n, seq_}, DType::i32)};
  int32_t* in = b.inputs.data<int32_t>();
  int32_t* tg = b.targets.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    const int32_t* w = tokens.data() + starts[static_cast<size_t>(i)];
    std::copy(w, w + seq_, in + i * seq_);
    std::copy(w + 1, w + seq_ + 1, tg + i * seq_);
  }
  return b;
}

int64_t Dataset::val_batches(int64_t batch, int64_t max_batches) const {
  WEFT_CHECK(batch >= 1, "validation batch size {} must be at least 1", batch);
  WEFT_CHECK(max_batches >= 1, "the validation batch cap {} must be at least 1", max_batches);
  return std::min(max_batches, std::max<int64_t>(1, val_windows() / batch));
}

Batch Dataset::val_batch(int64_t index, int64_t batch, const BatchSlice& s) const {
  WEFT_CHECK(index >= 0, "validation batch index {} must not be negative", index);
  auto [begin, end] = s.rows(batch);
  std::vector<int64_t> starts;
  for (int64_t i = begin; i < end; ++i)
    starts.push_back((index * batch + i) % val_windows() * seq_);
  return gather(val(), starts);
}

Sampler::Sampler(const Dataset& data, uint64_t seed, int64_t global_batch)
    : data_(&data), seed_(seed), batch_(global_batch) {
  WEFT_CHECK(global_batch >= 1, "the global batch of {} samples must be at least 1", global_batch);
  WEFT_CHECK(global_batch <= INT64_C(0xffffffff), "the global batch of {} samples is too large",
             global_batch);
}

int64_t Sampler::window_start(int64_t step, int64_t micro_step, int64_t sample) const {
  WEFT_CHECK(step >= 0 && micro_step >= 0 && micro_step <= INT64_C(0xffffffff) && sample >= 0 &&
                 sample < batch_,
             "no sample {} of micro-batch {} of step {} (batch {})", sample, micro_step, step,
             batch_);
  const uint64_t s = static_cast<uint64_t>(step);
  const uint64_t key = seed_ ^ kDataSeedTag;
  std::array<uint32_t, 4> w =
      kernels::philox4x32_10({static_cast<uint32_t>(sample), static_cast<uint32_t>(micro_step),
                              static_cast<uint32_t>(s), static_cast<uint32_t>(s >> 32)},
                             {static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32)});
  const uint64_t r = static_cast<uint64_t>(w[0]) | (static_cast<uint64_t>(w[1]) << 32);
  const uint64_t starts = static_cast<uint64_t>(data_->train_size_ - data_->seq_);
  return static_cast<int64_t>(r % starts);
}

Batch Sampler::next_batch(int64_t step, int64_t micro_step, const BatchSlice& s) const {
  auto [begin, end] = s.rows(batch_);
  std::vector<int64_t> starts;
  starts.reserve(static_cast<size_t>(end - begin));
  for (int64_t i = begin; i < end; ++i) starts.push_back(window_start(step, micro_step, i));
  return data_->gather(data_->train(), starts);
}

}  // namespace weft::io
