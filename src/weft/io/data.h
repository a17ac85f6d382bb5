// Training data: token files, the default corpus, the train/validation split
// and deterministic batch sampling.
//
// Files. A data file is either text (tokenized by ByteTokenizer, one token per
// byte) or an llm.c token shard: 256 little-endian int32 (header[0] = magic,
// header[1] = version, header[2] = token count) followed by that many tokens —
// GPT-2 shards (magic 20240520, version 1) hold uint16 tokens, llama-3 shards
// (magic 20240801, version 7; llm.c's second format) uint32 tokens. A file is
// a shard when it starts with a magic or its name ends in ".bin" (then a wrong
// magic is an error, not text). A file that is neither — a safetensors file,
// a compressed archive, binary data — is an error naming what it looks like.
// Several files (a list, or globs such as llm.c's "*_train_*.bin") are read
// in order and concatenated; they must all be text or all shards of one kind.
//
// Split. The last `val_fraction` of the tokens (at least seq+1 of them) is the
// validation split, the rest the training split; the two never share a token.
//
// Sampling. Sample i of micro-batch m of optimizer step s is the window of
// seq+1 training tokens starting at
//   start = r mod (train_tokens − seq),  r = the first 64 bits of
//   Philox-4x32-10(counter = {i, m, s_lo, s_hi}, key = seed ^ kDataSeedTag)
// (inputs are tokens [start, start+seq), targets [start+1, start+seq+1)). A
// batch is a pure function of (seed, step, micro-step): every rank computes
// the same global batch, takes its own rows (BatchSlice), and a run resumed at
// step s sees exactly the batches it would have seen — the data position a
// checkpoint must save is the step number (and the seed).
//
// Validation. Window k of the validation split starts at k·seq (seq+1 tokens,
// so each target token is predicted once); validation batch b holds windows
// b·B .. b·B+B−1, wrapping around when the split has fewer windows.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/core/tensor.h"

namespace weft::io {

inline constexpr int32_t kShardMagic = 20240520;
inline constexpr int32_t kShardVersion = 1;
inline constexpr int32_t kShardMagicU32 = 20240801;
inline constexpr int32_t kShardVersionU32 = 7;
// The vocabularies of the tokenizers llm.c writes shards for.
inline constexpr int64_t kGpt2Vocab = 50257;
inline constexpr int64_t kLlama3Vocab = 128256;
inline constexpr int64_t kShardHeaderInts = 256;
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";
// Keeps data sampling independent of dropout streams drawn from the same seed.
inline constexpr uint64_t kDataSeedTag = 0x6461746173616d70ull;  // "datasamp"

struct TokenData {
  // shard: GPT-2 (uint16) tokens; shard_u32: llama-3 (uint32) tokens.
  enum class Format { text, shard, shard_u32 };
  std::vector<int32_t> tokens;
  std::string source;  // the file, or a description of where the tokens came from
  Format format = Format::text;

  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  // Largest token + 1: the smallest vocabulary a model needs for this data.
  int32_t vocab_needed() const;
  // FNV-1a hash of the tokens: checkpoints record it so a resume can tell
  // whether it is reading the same data.
  uint64_t fingerprint() const;
};

// Text or shard, detected as described above. Missing, unreadable, empty and
// malformed files are a weft::Error that says what is wrong and what to pass.
TokenData load_tokens(const std::string& path);
// Several files: `spec` is a comma-separated list of paths and globs (each
// glob's matches in name order), concatenated in that order. A glob that
// matches nothing, a file named twice and a mix of formats are errors.
TokenData load_token_files(const std::string& spec);
// The paths of `spec` (globs expanded), and the format of its first file
// from its first bytes (reading no more).
std::vector<std::string> expand_data_paths(const std::string& spec);
TokenData::Format data_format(const std::string& spec);
// The vocabulary of the tokenizer that wrote the data: 256 for text (bytes),
// 50257 for GPT-2 shards, 128256 for llama-3 shards.
int64_t tokenizer_vocab(TokenData::Format format);
// `text` through the byte tokenizer.
TokenData text_tokens(std::string_view text, std::string source);
// Writes an llm.c shard (version 1) of `tokens`.
void write_token_shard(const std::string& path, std::span<const uint16_t> tokens);

// The fortune files of Debian's `fortunes` package in `dir` (every regular
// file except *.dat, the *.u8 links and subdirectories such as off/), in
// sorted name order, entries separated by a blank line instead of the "%"
// lines. A weft::Error naming the package and how to install it when absent.
std::string default_corpus_text(const std::string& dir = kFortunesDir);
TokenData default_corpus(const std::string& dir = kFortunesDir);

// inputs (B, T) i32, targets (B, T) i32 = inputs shifted left by one token.
struct Batch {
  Tensor inputs;
  Tensor targets;
  int64_t size() const { return inputs.defined() ? inputs.size(0) : 0; }
};

// Which rows of a global batch of B samples one rank takes: data-parallel rank
// r of D takes [r·B/D, (r+1)·B/D); in batch-sequence-parallel mode, TP rank t
// of S (sub_rank/sub_size) takes the t-th of S equal parts of those.
struct BatchSlice {
  int dp_rank = 0;
  int dp_size = 1;
  int sub_rank = 0;
  int sub_size = 1;

  // [begin, end) of a global batch of `global_batch` rows; a batch that does
  // not divide evenly is a weft::Error saying which sizes to use.
  std::pair<int64_t, int64_t> rows(int64_t global_batch) const;
};

// Rows `slice` of `global` (copies).
Batch slice(const Batch& global, const BatchSlice& s);

class Dataset {
 public:
  // Splits `data` for windows of `seq_len` tokens; fewer than 2·(seq_len+1)
  // tokens is a weft::Error asking for a larger --data file.
  Dataset(TokenData data, int64_t seq_len, double val_fraction = 0.1);
  // All of `train` for training and all of `val` for validation (llm.c's
  // separate val shard): each needs at least seq_len + 1 tokens.
  Dataset(TokenData train, TokenData val, int64_t seq_len);

  const TokenData& data() const { return data_; }
  int64_t seq_len() const { return seq_; }
  std::span<const int32_t> train() const;
  std::span<const int32_t> val() const;

  // Number of distinct validation windows.
  int64_t val_windows() const { return (val_size() - 1) / seq_; }
  // Validation batches of `batch` windows: min(max_batches, max(1, windows / batch)).
  int64_t val_batches(int64_t batch, int64_t max_batches) const;
  // Validation batch `index` of `batch` windows, the rows `s` takes.
  Batch val_batch(int64_t index, int64_t batch, const BatchSlice& s = {}) const;

 private:
  int64_t val_size() const { return data_.size() - train_size_; }
  // Copies windows starting at starts[i] (in `tokens`) into a (n, seq) batch.
  Batch gather(std::span<const int32_t> tokens, std::span<const int64_t> starts) const;
  friend class Sampler;

  TokenData data_;
  int64_t seq_ = 0;
  int64_t train_size_ = 0;
};

// Random training windows. The sampler keeps a pointer to `data`, which must
// outlive it and stay where it is.
class Sampler {
 public:
  // `global_batch` samples per micro-batch, summed over all data-parallel ranks.
  Sampler(const Dataset& data, uint64_t seed, int64_t global_batch);

  uint64_t seed() const { return seed_; }
  int64_t global_batch() const { return batch_; }
  // Start (in the training split) of sample `sample` of (step, micro_step).
  int64_t window_start(int64_t step, int64_t micro_step, int64_t sample) const;
  // The whole global batch of (step, micro_step).
  Batch global(int64_t step, int64_t micro_step) const { return next_batch(step, micro_step, {}); }
  // The rows of (step, micro_step) that `s` takes; only those are generated.
  Batch next_batch(int64_t step, int64_t micro_step, const BatchSlice& s) const;

 private:
  const Dataset* data_;
  uint64_t seed_;
  int64_t batch_;
};

}  // namespace weft::io
