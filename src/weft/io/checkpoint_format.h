// The on-disk format of a checkpoint directory (see checkpoint.h for the
// files): index.json's tensor entries, and CheckpointReader, which loading,
// `weft checkpoint export` and `inspect` read a directory through.
//
// A tensor entry of index.json ("tensors" and "optimizer"."tensors", by name):
//   {"dtype": "F32", "shape": [48, 16], "split_dim": 0, "blocks": 3,
//    "valid_rows": -1, "shards": [{"file": "model-rank0.safetensors",
//                                  "offset": 0, "length": 8,
//                                  "xxh3": "3f0c..."}, ...]}
// (and "nonfinite": N in a shard whose N values are NaN or infinite).
// shape is the global shape; the split dimension is `blocks` equal blocks and
// each shard holds [offset, offset + length) of every block; the shards tile
// a block exactly. An unsplit tensor (split_dim -1) is one shard of all its
// rows. A shard with "row_offset" and "row_length" holds only those rows
// (dimension 0) of that slice (generalized tensor parallelism splits the
// rows of a rank's slice again, ShardSpec's row split; the padding is never
// saved): the shards of one slice tile its rows. Each file's safetensors
// metadata repeats this per tensor (global_shape, split_dim, blocks, offset,
// length, valid_rows, and row_offset and row_length when rows are split), so
// rank 0 builds the index from the files themselves.
//
// Checksums (checksum.h; XXH3-64 as 16 hex digits): every shard's "xxh3" is
// the hash of that tensor's bytes in its file, computed by the rank that wrote
// it and kept in the file's metadata too; index.json's "header_xxh3" maps each
// .safetensors file to the hash of its length field and header; index.json and
// rank<R>.json end with a member "xxh3", the hash of every byte of the file
// before the line that holds it (sealed_json_text). Reading checks each of
// these on every byte it reads: a tensor is read whole and hashed as it comes
// in, and a mismatch is an error naming the file, the tensor and both values.
// The writer also counts each shard's non-finite values ("nonfinite", absent
// when 0): bytes that match their checksum are the bytes it counted, so a
// verified read needs no second pass to refuse NaN; unverified reads scan.
// Checkpoints written before checksums existed have none of these members;
// they load unverified (has_checksums() is false).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "weft/io/json.h"
#include "weft/io/safetensors.h"
#include "weft/nn/parameter.h"
#include "weft/parallel/rng.h"

namespace weft::io {

inline constexpr const char* kCheckpointFormat = "weft-checkpoint";
inline constexpr int kCheckpointFormatVersion = 1;

struct SavedShard {
  std::string file{};  // relative to the checkpoint directory
  int64_t offset = 0;  // along the split dimension, in every block
  int64_t length = 0;
  // Rows [row_offset, row_offset + row_length) of that slice; -1: all of them.
  int64_t row_offset = 0;
  int64_t row_length = -1;
  std::optional<uint64_t> xxh3{};  // of the tensor's bytes in `file`
  int64_t nonfinite = 0;           // NaN and infinite values in them, counted when written
};

struct SavedTensor {
  std::string name{};
  std::string dtype{};  // "F32"
  Shape global_shape{};
  int split_dim = -1;  // -1: one shard holds the whole tensor
  int64_t blocks = 1;
  int64_t valid_rows = -1;
  std::vector<SavedShard> shards{};  // by offset; they tile each block exactly
};

struct ReadOptions {
  // Check the checksums (off only to measure what checking costs).
  bool verify = true;
  // Let NaN and infinite values through (`weft eval --allow-nonfinite`);
  // otherwise reading one is an error naming the tensor and the file.
  bool allow_nonfinite = false;
  // Print one line to stderr when the checkpoint carries no checksums.
  bool note_unverified = true;
};

class CheckpointReader {
 public:
  // Reads and validates DIR/index.json (its checksum too); opens tensor files
  // on first use (checking their header checksums).
  explicit CheckpointReader(std::string dir, ReadOptions options = {});
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::string& dir() const { return dir_; }
  const Json& index() const { return index_; }
  int64_t step() const;
  // The saved grid: world size, order ("tp-dp") and the size of each dimension.
  int world() const;
  std::string order() const;
  std::vector<std::pair<std::string, int>> sizes() const;
  // Null when the checkpoint holds no model shape (a model other than Gpt).
  const Json* model_shape() const { return index_.find("model"); }
  bool has_optimizer() const;
  // False for checkpoints written before weft wrote checksums.
  bool has_checksums() const { return sealed_; }

  // Parameters, and optimizer moments (empty without optimizer state), by name.
  const std::vector<SavedTensor>& tensors() const { return tensors_; }
  const std::vector<SavedTensor>& optimizer_tensors() const { return optimizer_tensors_; }
  // nullptr when absent.
  const SavedTensor* find(const std::string& name) const;
  const SavedTensor* find_optimizer(const std::string& name) const;

  // The part of `t` that `target` describes (a spec of t's global shape:
  // a rank's slice, or the whole tensor when not split), as f32. Reads only
  // the overlapping parts of the shards. A shared target (ShardSpec::shared)
  // is its blocks of the shared slice.
  Tensor read(const SavedTensor& t, const nn::ShardSpec& target) const;
  // The whole tensor.
  Tensor read_full(const SavedTensor& t) const;

  // The saved random streams of world rank `rank`.
  parallel::RngTracker::State rank_rng(int rank) const;
  // The scaling state world rank `rank` saved (null when it saved none).
  Json rank_scaling(int rank) const;

  // The file `name` of the checkpoint, opened and its header checked.
  const SafetensorsFile& file(const std::string& name) const;
  // The whole tensor `t` as shard `s`'s file holds it, its checksum and its
  // values checked (as the options say).
  Tensor read_shard(const SavedTensor& t, const SavedShard& s) const;

 private:
  // Shards [begin, end) of `t`, one slice's row pieces, as that slice.
  Tensor read_slice(const SavedTensor& t, size_t begin, size_t end) const;

  std::string dir_;
  ReadOptions options_;
  bool sealed_ = false;
  Json index_;
  std::vector<SavedTensor> tensors_, optimizer_tensors_;
  mutable std::map<std::string, std::unique_ptr<SafetensorsFile>> files_;
};

// ---- pieces of the format, shared by the writer ----

// Seeds and offsets are uint64: JSON integers while they fit int64, else
// decimal strings.
Json u64_json(uint64_t v);
uint64_t json_u64(const Json& j, const std::string& what);
Json shape_json(const Shape& s);
Shape shape_from_json(const Json& j, const std::string& where);
// rank<R>.json's "rng": {"default": {"seed": S, "offset": O}, ...}
Json rng_json(const parallel::RngTracker::State& state);
// A tensor entry of index.json.
Json saved_tensor_json(const SavedTensor& t);
// The JSON text of object `j` (indent 2) with a last member "xxh3": the
// XXH3-64 of every byte before that member's line.
std::string sealed_json_text(const Json& j);
// Parses `text` (from `path`); when it ends with an "xxh3" member, checks it
// (an error names the file and both values) and removes it. `sealed` tells
// whether it had one.
Json parse_sealed_json(const std::string& text, const std::string& path, bool& sealed);
// An error unless every value of `t` (f32, bf16 or f16; other types pass) is
// finite; it names `what` (e.g. "parameter h.0.attn.qkv.weight") and `file`.
void check_finite(const Tensor& t, const std::string& what, const std::string& file);
// How many values of `t` are NaN or infinite (f32, bf16 or f16; 0 for other types).
int64_t count_nonfinite(const Tensor& t);

// Sorts the shards (by offset, then rows), drops exact duplicates and checks
// that they tile each block of the split dimension (or all rows of an
// unsplit tensor) and the row pieces of each slice its rows; errors start
// with `where`.
void check_tiling(SavedTensor& t, const std::string& where);

}  // namespace weft::io
