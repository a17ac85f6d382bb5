#include "weft/io/data_prepare.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "weft/core/error.h"
#include "weft/io/data.h"
#include "weft/text/batch.h"
#include "weft/text/tokenizer.h"
#include "weft/text/unicode.h"

namespace fs = std::filesystem;

namespace weft::io {

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  WEFT_CHECK(in.good(), "cannot read {}: {}", path, std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool is_jsonl(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  return ext == ".jsonl" || ext == ".ndjson";
}

// The documents of one input (views into `data`, or into `owned` for JSONL).
void documents_of(const std::string& path, const std::string& data, const std::string& field,
                  std::deque<std::string>& owned, std::vector<std::string_view>& docs) {
  const size_t bad = text::invalid_utf8_offset(data);
  WEFT_CHECK(bad == std::string::npos,
             "{} is not UTF-8 text (byte offset {}); weft data prepare reads UTF-8", path, bad);
  if (!is_jsonl(path)) {
    docs.emplace_back(data);
    return;
  }
  size_t start = 0;
  int64_t line = 0;
  while (start < data.size()) {
    size_t end = data.find('\n', start);
    if (end == std::string::npos) end = data.size();
    ++line;
    std::string_view text(data.data() + start, end - start);
    start = end + 1;
    if (text.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      WEFT_FAIL("{} line {} is not JSON ({}); JSON Lines files hold one object a line", path, line,
                e.what());
    }
    WEFT_CHECK(j.is_object() && j.contains(field) && j.at(field).is_string(),
               "{} line {} has no string field \"{}\"; pass --text-field NAME", path, line, field);
    owned.push_back(j.at(field).get<std::string>());
    docs.emplace_back(owned.back());
  }
}

void sync_and_rename(const std::string& tmp, const std::string& path) {
  const int fd = ::open(tmp.c_str(), O_RDONLY);
  WEFT_CHECK(fd >= 0 && ::fsync(fd) == 0, "cannot sync {}: {}", tmp, std::strerror(errno));
  ::close(fd);
  WEFT_CHECK(::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename {} to {}: {}", tmp, path,
             std::strerror(errno));
}

void write_atomically(const std::string& path, const void* header, size_t header_bytes,
                      const void* data, size_t bytes) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    WEFT_CHECK(out.good(), "cannot create {}: {}", tmp, std::strerror(errno));
    if (header_bytes)
      out.write(static_cast<const char*>(header), static_cast<std::streamsize>(header_bytes));
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    out.close();
    WEFT_CHECK(!out.fail(), "cannot write {}: {}", tmp, std::strerror(errno));
  }
  sync_and_rename(tmp, path);
}

void write_shard(const std::string& path, std::span<const uint32_t> tokens, bool wide) {
  std::array<int32_t, kShardHeaderInts> header{};
  header[0] = wide ? kShardMagicU32 : kShardMagic;
  header[1] = wide ? kShardVersionU32 : kShardVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  if (wide) {
    write_atomically(path, header.data(), sizeof header, tokens.data(), tokens.size_bytes());
    return;
  }
  std::vector<uint16_t> narrow(tokens.begin(), tokens.end());
  write_atomically(path, header.data(), sizeof header, narrow.data(),
                   narrow.size() * sizeof(uint16_t));
}

}  // namespace

int32_t end_of_text_id(const text::Tokenizer& tok, const std::string& eot, std::string& name) {
  if (!eot.empty()) {
    auto id = tok.token_to_id(eot);
    WEFT_CHECK(id.has_value(), "--eot {}: the tokenizer {} has no such token", eot, tok.source());
    name = eot;
    return *id;
  }
  if (auto id = tok.token_to_id("<|endoftext|>")) {
    name = "<|endoftext|>";
    return *id;
  }
  if (!tok.prefix_ids().empty()) {
    name = tok.id_to_token(tok.prefix_ids().front());
    return tok.prefix_ids().front();
  }
  for (const char* candidate : {"</s>", "<|end_of_text|>", "<eos>"}) {
    if (auto id = tok.token_to_id(candidate)) {
      name = candidate;
      return *id;
    }
  }
  WEFT_FAIL(
      "the tokenizer {} has no end-of-text token weft recognizes (<|endoftext|>, a BOS, </s>, "
      "<|end_of_text|>, <eos>); name the one to put before each document with --eot TOKEN",
      tok.source());
}

PrepareSummary prepare_data(const text::Tokenizer& tok, const std::vector<std::string>& inputs,
                            const PrepareOptions& opts,
                            const std::function<void(int64_t, int64_t)>& progress) {
  WEFT_CHECK(!inputs.empty(), "give the inputs: text files or JSON Lines (.jsonl) files");
  WEFT_CHECK(opts.shard_tokens >= 1 && opts.shard_tokens <= INT32_MAX,
             "--shard-tokens {} must be between 1 and {}", opts.shard_tokens, INT32_MAX);
  WEFT_CHECK(opts.val_tokens >= -1, "--val-tokens {} must be 0 or more", opts.val_tokens);
  WEFT_CHECK(!opts.name.empty() && opts.name.find('/') == std::string::npos,
             "--name '{}' must be a file name prefix without '/'", opts.name);
  WEFT_CHECK(opts.val_tokens <= opts.shard_tokens,
             "--val-tokens {} is more than a shard holds (--shard-tokens {})", opts.val_tokens,
             opts.shard_tokens);
  PrepareSummary s;
  s.eot_id = end_of_text_id(tok, opts.eot, s.eot);
  const bool wide = tok.vocab_size() > 65536;

  int64_t total = 0;
  std::set<std::string> seen;
  for (const auto& in : inputs) {
    std::error_code ec;
    WEFT_CHECK(fs::is_regular_file(in, ec),
               "{} is not a file; pass text files or JSON Lines (.jsonl) files", in);
    WEFT_CHECK(seen.insert(fs::weakly_canonical(in).string()).second, "{} is named twice", in);
    total += static_cast<int64_t>(fs::file_size(in));
  }
  std::vector<uint32_t> tokens;
  // Batches of about 64 MB of input, each encoded over the threads.
  constexpr int64_t kBatchBytes = int64_t{64} << 20;
  size_t next = 0;
  while (next < inputs.size()) {
    // Deques: the views into them stay valid as they grow.
    std::deque<std::string> data, owned;
    std::vector<std::string_view> docs;
    int64_t bytes = 0;
    while (next < inputs.size() && (data.empty() || bytes < kBatchBytes)) {
      data.push_back(read_file(inputs[next]));
      bytes += static_cast<int64_t>(data.back().size());
      documents_of(inputs[next], data.back(), opts.text_field, owned, docs);
      ++next;
    }
    const int64_t done_bytes = s.bytes;
    int64_t batch_done = 0;
    const auto ids = text::encode_batch(tok, docs, opts.threads, false, [&](size_t) {
      if (progress && ++batch_done % 64 == 0)
        progress(done_bytes +
                     bytes * batch_done / std::max<int64_t>(1, static_cast<int64_t>(docs.size())),
                 total);
    });
    for (const auto& doc : ids) {
      tokens.push_back(static_cast<uint32_t>(s.eot_id));
      tokens.insert(tokens.end(), doc.begin(), doc.end());
    }
    s.documents += static_cast<int64_t>(docs.size());
    s.bytes = done_bytes + bytes;
    if (progress) progress(s.bytes, total);
  }
  s.tokens = static_cast<int64_t>(tokens.size());
  s.val_tokens = opts.val_tokens >= 0 ? std::min<int64_t>(opts.val_tokens, s.tokens)
                                      : std::min<int64_t>(opts.shard_tokens, s.tokens / 10);
  WEFT_CHECK(s.val_tokens <= opts.shard_tokens,
             "--val-tokens {} is more than a shard holds (--shard-tokens {})", s.val_tokens,
             opts.shard_tokens);
  WEFT_CHECK(s.tokens > s.val_tokens,
             "all {} tokens would go to the validation shard; pass a --val-tokens below {}",
             s.tokens, s.tokens);

  std::error_code ec;
  fs::create_directories(opts.output, ec);
  WEFT_CHECK(fs::is_directory(opts.output), "cannot create the directory {}: {}", opts.output,
             ec.message());
  auto shard_path = [&](const char* split, int64_t index) {
    char name[32];
    std::snprintf(name, sizeof name, "_%s_%06lld.bin", split, static_cast<long long>(index));
    return (fs::path(opts.output) / (opts.name + name)).string();
  };
  const std::span<const uint32_t> all(tokens);
  if (s.val_tokens > 0) {
    s.files.push_back(shard_path("val", 0));
    write_shard(s.files.back(), all.first(static_cast<size_t>(s.val_tokens)), wide);
  }
  int64_t index = 1;
  for (int64_t at = s.val_tokens; at < s.tokens; at += opts.shard_tokens, ++index) {
    const int64_t n = std::min(opts.shard_tokens, s.tokens - at);
    s.files.push_back(shard_path("train", index));
    write_shard(s.files.back(), all.subspan(static_cast<size_t>(at), static_cast<size_t>(n)), wide);
  }
  const std::string tok_path = (fs::path(opts.output) / "tokenizer.json").string();
  if (fs::weakly_canonical(tok_path, ec) != fs::weakly_canonical(tok.source(), ec))
    write_atomically(tok_path, nullptr, 0, tok.json().data(), tok.json().size());
  // Shards of an earlier run under this name that this run did not write.
  const std::set<std::string> written(s.files.begin(), s.files.end());
  const std::regex ours(
      std::regex_replace(opts.name, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
      "_(val|train)_[0-9]{6}\\.bin");
  for (const auto& e : fs::directory_iterator(opts.output, ec)) {
    const std::string file = e.path().filename().string();
    if (std::regex_match(file, ours) && !written.count(e.path().string())) fs::remove(e.path(), ec);
  }
  const int dir = ::open(opts.output.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return s;
}

TokenData tokenize_text(const text::Tokenizer& tok, std::string_view text, std::string source) {
  const size_t bad = text::invalid_utf8_offset(text);
  WEFT_CHECK(bad == std::string::npos, "{} is not UTF-8 text (byte offset {})", source, bad);
  TokenData data;
  data.tokens = tok.encode(text, true);
  data.source = std::move(source);
  return data;
}

TokenData tokenize_text_files(const text::Tokenizer& tok, const std::string& spec) {
  TokenData all;
  for (const std::string& path : expand_data_paths(spec)) {
    TokenData one = tokenize_text(tok, read_file(path), path);
    all.tokens.insert(all.tokens.end(), one.tokens.begin(), one.tokens.end());
    all.source += (all.source.empty() ? "" : ",") + path;
  }
  return all;
}

std::string tokenizer_beside(const std::string& data_spec) {
  std::vector<std::string> paths;
  try {
    paths = expand_data_paths(data_spec);
  } catch (const Error&) {
    return "";
  }
  if (paths.empty()) return "";
  const fs::path dir = fs::path(paths.front()).parent_path();
  const fs::path candidate = (dir.empty() ? fs::path(".") : dir) / "tokenizer.json";
  std::error_code ec;
  return fs::is_regular_file(candidate, ec) ? candidate.string() : "";
}

}  // namespace weft::io
