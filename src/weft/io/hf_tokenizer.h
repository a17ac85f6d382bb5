// A Hugging Face tokenizer in model directories: the files export writes for
// a checkpoint that carries a tokenizer.json (tokenizer.json itself,
// tokenizer_config.json naming PreTrainedTokenizerFast and the special
// tokens, special_tokens_map.json), and the tokenizer.json import reads.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "weft/io/json.h"

namespace weft::io {

// tokenizer.json (`tokenizer_json` parsed), tokenizer_config.json and
// special_tokens_map.json: the BOS is the token the post-processor puts
// first, the EOS <|endoftext|>, </s>, <|end_of_text|> or <eos> (the first the
// tokenizer has; GPT-2's BOS is its <|endoftext|> too), the unknown token
// <unk> where it exists.
std::map<std::string, Json> hf_tokenizer_files(const std::string& tokenizer_json,
                                               int64_t model_max_length);

// `config` (config.json or generation_config.json) with bos_token_id and
// eos_token_id of those tokens, where the tokenizer has them.
void set_special_token_ids(const std::string& tokenizer_json, Json& config);

// The tokenizer.json of a Hugging Face model directory (`path`; "" for a
// file or a directory without one), checked to be one weft reads (an
// unsupported component is a weft::Error naming it) and to fit `vocab`.
std::string hf_directory_tokenizer(const std::string& path, int64_t vocab);

}  // namespace weft::io
