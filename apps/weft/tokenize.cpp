// `weft tokenize`: text to token ids (and back with --decode) through a
// Hugging Face tokenizer.json.
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "weft/core/error.h"
#include "weft/core/threads.h"
#include "weft/text/batch.h"
#include "weft/text/tokenizer.h"
#include "weft/text/unicode.h"

namespace weft {
namespace {

cli::Options tokenize_options() {
  cli::Options opts(
      "weft tokenize --tokenizer FILE|DIR [options] FILE...|-",
      "Writes the token ids of each input (a file, or - for standard input) on a line\n"
      "of its own, separated by spaces: the ids Hugging Face's tokenizers library\n"
      "gives for encode(text), the post-processor's special tokens (a BOS) included.\n"
      "Each input is one document; documents are shared out over --threads threads.\n"
      "--decode reads such lines and writes their text back (the special tokens the\n"
      "post-processor adds at the start or end of a line are left out, every other\n"
      "id decodes as the library's decode does), so `weft tokenize F | weft tokenize\n"
      "--decode -` gives a byte-level tokenizer's text back exactly.");
  opts.option("tokenizer", "FILE|DIR", "none",
              "a tokenizer.json, or a directory that holds one (required)")
      .option("threads", "N", "all cores", "encoding threads")
      .flag("decode", "read token ids and write text")
      .positional_list("FILE...|-", "the inputs (- reads standard input)");
  return opts;
}

std::string read_input(const std::string& path) {
  std::stringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  WEFT_CHECK(in.good(), "cannot read {}; pass text files or - for standard input", path);
  ss << in.rdbuf();
  return ss.str();
}

void write_all(const std::string& s) {
  WEFT_CHECK(std::fwrite(s.data(), 1, s.size(), stdout) == s.size(), "cannot write the output");
}

// "12 7 99\n" lines -> text.
void decode_input(const text::Tokenizer& tok, const std::string& name, const std::string& data) {
  const auto& prefix = tok.prefix_ids();
  const auto& suffix = tok.suffix_ids();
  size_t line_start = 0;
  int64_t line_no = 0;
  std::string out;
  while (line_start < data.size()) {
    size_t end = data.find('\n', line_start);
    if (end == std::string::npos) end = data.size();
    ++line_no;
    std::vector<int32_t> ids;
    const char* p = data.data() + line_start;
    const char* e = data.data() + end;
    while (p < e) {
      while (p < e && (*p == ' ' || *p == '\t' || *p == ',' || *p == '\r')) ++p;
      if (p == e) break;
      int64_t v = 0;
      auto [q, ec] = std::from_chars(p, e, v);
      const char* tok_end = p;
      while (tok_end < e && *tok_end != ' ' && *tok_end != '\t' && *tok_end != ',' &&
             *tok_end != '\r')
        ++tok_end;
      WEFT_CHECK(
          ec == std::errc() && q == tok_end && v >= 0 && v <= INT32_MAX,
          "{} line {}: '{}' is not a token id; --decode reads lines of ids separated by spaces",
          name, line_no, std::string(p, tok_end));
      ids.push_back(static_cast<int32_t>(v));
      p = q;
    }
    std::span<const int32_t> view(ids);
    if (!prefix.empty() && view.size() >= prefix.size() &&
        std::equal(prefix.begin(), prefix.end(), view.begin()))
      view = view.subspan(prefix.size());
    if (!suffix.empty() && view.size() >= suffix.size() &&
        std::equal(suffix.begin(), suffix.end(), view.end() - static_cast<long>(suffix.size())))
      view = view.first(view.size() - suffix.size());
    try {
      out += tok.decode(view);
    } catch (const Error& err) {
      WEFT_FAIL("{} line {}: {}", name, line_no, err.what());
    }
    line_start = end + 1;
  }
  write_all(out);
}

int tokenize(const std::vector<std::string>& args) {
  cli::Options opts = tokenize_options();
  opts.parse(args);
  WEFT_CHECK(opts.given("tokenizer"),
             "give the tokenizer: weft tokenize --tokenizer FILE|DIR FILE...|-");
  const auto& inputs = opts.positionals();
  WEFT_CHECK(!inputs.empty(),
             "give the inputs: weft tokenize --tokenizer {} FILE...|- (- reads standard input)",
             opts.str("tokenizer"));
  const int threads =
      opts.given("threads") ? static_cast<int>(opts.integer("threads")) : available_cores();
  WEFT_CHECK(threads >= 1 && threads <= 1024, "--threads {} must be between 1 and 1024", threads);
  const text::Tokenizer tok = text::Tokenizer::from_file(opts.str("tokenizer"));

  std::vector<std::string> docs;
  docs.reserve(inputs.size());
  for (const auto& path : inputs) {
    docs.push_back(read_input(path));
    if (!opts.flag_set("decode")) {
      const size_t bad = text::invalid_utf8_offset(docs.back());
      WEFT_CHECK(bad == std::string::npos,
                 "{} is not UTF-8 text (byte offset {}); weft tokenize reads UTF-8",
                 path == "-" ? "standard input" : path, bad);
    }
  }
  if (opts.flag_set("decode")) {
    for (size_t i = 0; i < docs.size(); ++i)
      decode_input(tok, inputs[i] == "-" ? "standard input" : inputs[i], docs[i]);
    return 0;
  }
  std::vector<std::string_view> views(docs.begin(), docs.end());
  const auto ids = text::encode_batch(tok, views, threads);
  std::string out;
  char buf[16];
  for (const auto& doc : ids) {
    out.clear();
    out.reserve(doc.size() * 6 + 1);
    for (size_t k = 0; k < doc.size(); ++k) {
      if (k) out += ' ';
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, doc[k]);
      out.append(buf, end);
    }
    out += '\n';
    write_all(out);
  }
  return 0;
}

const cli::Register reg_tokenize("tokenize",
                                 "text to token ids (and back) with a Hugging Face tokenizer.json",
                                 tokenize_options, tokenize);

}  // namespace
}  // namespace weft
