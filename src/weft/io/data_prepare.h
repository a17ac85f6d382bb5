// Data preparation: text files (one file, one document) and JSON Lines files
// (.jsonl/.ndjson: one document a line, its text in a field) into llm.c token
// shards, through a Hugging Face tokenizer — what llm.c's dev/data scripts do.
//
// Every document is preceded by the end-of-text token (GPT-2's
// <|endoftext|>; else the BOS the tokenizer's post-processor prepends, as
// llm.c's Llama-3 script uses; else </s> or <|end_of_text|>; or the token
// named by `eot`), followed by its ids without special tokens. The first
// `val_tokens` tokens are the validation shard NAME_val_000000.bin, the rest
// the training shards NAME_train_000001.bin, … of at most `shard_tokens`
// tokens each. Shards are llm.c's: version 1 (magic 20240520, uint16) when
// the vocabulary fits in 16 bits, else magic 20240801 version 7 (uint32).
// Each file is written to a temporary name, synced and renamed; the
// tokenizer.json is written beside the shards, and older shards of the same
// name that this run did not write are removed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/io/data.h"

namespace weft::text {
class Tokenizer;
}

namespace weft::io {

struct PrepareOptions {
  std::string output;  // the directory (created if missing)
  std::string name = "data";
  int64_t shard_tokens = 100'000'000;
  int64_t val_tokens = -1;  // -1: min(shard_tokens, a tenth of the tokens)
  int threads = 1;
  std::string text_field = "text";
  std::string eot;  // the end-of-text token's text; "" chooses as above
};

struct PrepareSummary {
  int64_t documents = 0, tokens = 0, bytes = 0, val_tokens = 0;
  int32_t eot_id = 0;
  std::string eot;
  std::vector<std::string> files;  // the shards written, in order
};

// The end-of-text token: `eot` when given (a weft::Error when the tokenizer
// has no such token), else the choice described above (a weft::Error asking
// for --eot when there is none). Sets `name` to its text.
int32_t end_of_text_id(const text::Tokenizer& tok, const std::string& eot, std::string& name);

// `progress(bytes_done, bytes_total)` after each batch of documents.
PrepareSummary prepare_data(const text::Tokenizer& tok, const std::vector<std::string>& inputs,
                            const PrepareOptions& opts,
                            const std::function<void(int64_t, int64_t)>& progress = {});

// Text files (a data spec: comma-separated paths and globs) through `tok`,
// each encoded as transformers encodes a text (post-processor BOS included)
// and concatenated: how `weft eval --data` reads text for a checkpoint that
// carries a tokenizer. A file that is not UTF-8 is named with its byte offset.
TokenData tokenize_text_files(const text::Tokenizer& tok, const std::string& spec);
// `text` (named `source`) through `tok` the same way.
TokenData tokenize_text(const text::Tokenizer& tok, std::string_view text, std::string source);

// The tokenizer.json in the directory of the first file of a data spec (as
// load_token_files takes it), or "" when there is none.
std::string tokenizer_beside(const std::string& data_spec);

}  // namespace weft::io
