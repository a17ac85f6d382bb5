// The tokenizer a checkpoint carries: DIR/tokenizer.json (the Hugging Face
// file the run was trained with, byte for byte), listed in index.json as
// "tokenizer": {"file": "tokenizer.json", "xxh3": "…"} and checked against
// that checksum when read.
#pragma once

#include <string>

#include "weft/io/json.h"

namespace weft::io {

inline constexpr const char* kTokenizerFile = "tokenizer.json";

// index.json's "tokenizer" entry for `json`.
Json tokenizer_index_entry(const std::string& json);
// The tokenizer.json text of the checkpoint `dir` (a checkpoint directory;
// `latest` and run directories are resolved), "" when it carries none. A
// file that does not match its checksum is a weft::Error naming it.
std::string checkpoint_tokenizer(const std::string& dir);
// What `weft generate` and `weft eval` encode text with: the checkpoint's
// tokenizer.json, else (a Hugging Face model directory) the directory's
// tokenizer.json, else "".
std::string model_tokenizer(const std::string& path);

}  // namespace weft::io
