// The tokenizer of a run: which tokenizer.json it trains with (stored in
// every checkpoint), and text <-> ids through it for samples.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/train/config.h"

namespace weft::text {
class Tokenizer;
}

namespace weft::train {

// The tokenizer.json text of a run: --tokenizer's file, else the
// tokenizer.json beside --data's first file (weft data prepare writes one),
// else the one the resumed checkpoint (or --init's checkpoint) carries, else
// "". `where` is set to where it came from. A file that is not a tokenizer
// weft reads is a weft::Error naming it.
std::string find_run_tokenizer(const TrainConfig& cfg, std::string& where);

// The prompt ids of `text` as transformers encodes it (the post-processor's
// BOS included); an empty result (no BOS, empty text) is the end-of-text token.
std::vector<int32_t> encode_prompt(const text::Tokenizer& tok, const std::string& text);
// The text of generated ids (special tokens left out, as transformers'
// decode(ids, skip_special_tokens=True)); ids the tokenizer lacks (a model
// vocabulary padded past the tokenizer's) are left out too.
std::string decode_generated(const text::Tokenizer& tok, const std::vector<int32_t>& ids);

}  // namespace weft::train
