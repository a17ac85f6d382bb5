// `weft data prepare`: text and JSON Lines files into llm.c token shards.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "weft/core/error.h"
#include "weft/core/threads.h"
#include "weft/io/data_prepare.h"
#include "weft/text/tokenizer.h"

namespace weft {
namespace {

cli::Options prepare_options() {
  cli::Options opts(
      "weft data prepare --tokenizer FILE|DIR --output DIR [options] INPUT...",
      "Tokenizes text files (one file, one document) and JSON Lines files (.jsonl,\n"
      ".ndjson: one document a line, its text in --text-field) into llm.c token\n"
      "shards, as llm.c's data scripts do: each document is preceded by the\n"
      "tokenizer's end-of-text token (<|endoftext|>; else the BOS its post-processor\n"
      "adds; else </s>; --eot names another). The first --val-tokens tokens are\n"
      "DIR/NAME_val_000000.bin, the rest DIR/NAME_train_000001.bin, ... of at most\n"
      "--shard-tokens tokens each (uint16 tokens below a 65536-token vocabulary,\n"
      "else llm.c's uint32 format). The tokenizer.json is written beside them, so\n"
      "`weft train --data 'DIR/NAME_train_*.bin'` takes its vocabulary (and stores\n"
      "it in the checkpoints). Files are written atomically; older shards of NAME\n"
      "in DIR are replaced.");
  opts.option("tokenizer", "FILE|DIR", "none",
              "a tokenizer.json, or a directory that holds one (required)")
      .option("output", "DIR", "none", "the directory of the shards (required)")
      .option("name", "NAME", "data", "the shards' file name prefix")
      .option("shard-tokens", "N", "100000000", "tokens per training shard")
      .option("val-tokens", "N", "a tenth, at most a shard", "tokens of the validation shard")
      .option("threads", "N", "all cores", "tokenizing threads")
      .option("text-field", "NAME", "text", "the field of a JSON Lines object that holds the text")
      .option("eot", "TOKEN", "the tokenizer's", "the token put before each document")
      .positional_list("INPUT...", "text files and .jsonl files");
  return opts;
}

std::string clock(double s) {
  const auto t = static_cast<int64_t>(s + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(t / 60),
                static_cast<long long>(t % 60));
  return buf;
}

int prepare(const std::vector<std::string>& args) {
  cli::Options opts = prepare_options();
  opts.parse(args);
  WEFT_CHECK(opts.given("tokenizer"),
             "give the tokenizer: weft data prepare --tokenizer FILE|DIR --output DIR INPUT...");
  WEFT_CHECK(opts.given("output"),
             "give the output directory: weft data prepare ... --output DIR INPUT...");
  WEFT_CHECK(!opts.positionals().empty(),
             "give the inputs: weft data prepare ... --output {} INPUT...", opts.str("output"));
  io::PrepareOptions p;
  p.output = opts.str("output");
  p.name = opts.str("name");
  p.shard_tokens = opts.integer("shard-tokens");
  if (opts.given("val-tokens")) p.val_tokens = opts.integer("val-tokens");
  WEFT_CHECK(p.val_tokens >= -1 && !(opts.given("val-tokens") && p.val_tokens < 0),
             "--val-tokens {} must be 0 or more", p.val_tokens);
  p.threads = opts.given("threads") ? static_cast<int>(opts.integer("threads")) : available_cores();
  WEFT_CHECK(p.threads >= 1 && p.threads <= 1024, "--threads {} must be between 1 and 1024",
             p.threads);
  p.text_field = opts.str("text-field");
  if (opts.given("eot")) p.eot = opts.str("eot");
  const text::Tokenizer tok = text::Tokenizer::from_file(opts.str("tokenizer"));

  const bool tty = ::isatty(STDERR_FILENO) == 1;
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  auto progress = [&](int64_t done, int64_t total) {
    if (!tty) return;
    const double s = seconds(),
                 frac = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
    const double rate = s > 0 ? static_cast<double>(done) / 1e6 / s : 0.0;
    const int width = 30, filled = static_cast<int>(frac * width);
    std::fprintf(stderr, "\r[%s%s] %3.0f%%  %.1f MB/s  ETA %s ",
                 std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(width - filled), ' ').c_str(), frac * 100, rate,
                 frac > 0 ? clock(s / frac - s).c_str() : "?");
    std::fflush(stderr);
  };
  const io::PrepareSummary s = io::prepare_data(tok, opts.positionals(), p, progress);
  if (tty) std::fprintf(stderr, "\n");
  const double secs = seconds();
  std::cout << format(
      "{} documents, {} MB, {} tokens ({} validation) in {} shards of {} in {:.1f} s ({:.1f} "
      "MB/s); end-of-text {} "
      "({})\n",
      s.documents, format("{:.1f}", static_cast<double>(s.bytes) / 1e6), s.tokens, s.val_tokens,
      s.files.size(), p.output, secs, secs > 0 ? static_cast<double>(s.bytes) / 1e6 / secs : 0.0,
      s.eot, s.eot_id);
  return 0;
}

const cli::Register reg_prepare("data prepare", "text and JSON Lines files into llm.c token shards",
                                prepare_options, prepare);

}  // namespace
}  // namespace weft
