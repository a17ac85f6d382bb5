// Checkpoints: every rank writes the slices it owns; any layout can load them.
//
// A checkpoint is a directory (format version 1):
//   index.json                        written last: format, step, data seed, the
//                                     layout it was saved at, the model shape, the run
//                                     config, the files, and for every tensor its
//                                     dtype, global shape, split and shards
//   model-rank<R>.safetensors         the parameter slices world rank R owns
//   optimizer-rank<R>.safetensors     AdamW moments of the same slices, named
//                                     <param>.exp_avg and <param>.exp_avg_sq
//   rank<R>.json                      rank R's grid coordinates and random streams
// with checksums of every tensor, header and JSON file (checkpoint_format.h).
//
// Ownership: a rank writes a parameter only when its coordinate is 0 along
// every group the parameter is replicated over (ShardSpec::replicated_over),
// so data-parallel replicas and TP-replicated layers are written once. A
// slice shared by several TP ranks (replicated key/value heads,
// ShardSpec::shared) is gathered over its share group and written whole by
// its shared rank 0, as the slice of a layout without the replication. Each
// tensor's safetensors metadata records its global shape, split dimension,
// blocks, offset and length (the ShardSpec), so a file describes itself.
//
// Atomicity: every file goes to a sibling directory DIR.tmp-<nonce>; rank 0
// writes index.json last, fsyncs, and renames the directory to DIR (an existing
// DIR, which must be a weft checkpoint, is swapped out only then, atomically
// where the filesystem supports RENAME_EXCHANGE). A failure on any rank fails
// the save on every rank, removes the temporary directory and leaves DIR as it
// was; a crash can leave a DIR.tmp-* behind, never a half-written DIR (the
// next save to DIR removes such leftovers).
//
// Loading reads, for each local parameter, only the parts of the saved shards
// that overlap its slice (its ShardSpec at the current layout), so TP, DP and
// SP may all differ from the saved layout. Errors (a missing or truncated file,
// a checkpoint of another model shape) are weft::Errors raised on every rank.
//
// Nothing in a checkpoint is executed: index.json and rank<R>.json are strict
// JSON, tensors are validated safetensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/comm/grid.h"
#include "weft/comm/process_group.h"
#include "weft/io/checkpoint_format.h"
#include "weft/io/json.h"
#include "weft/nn/gpt.h"
#include "weft/nn/module.h"
#include "weft/optim/adamw.h"
#include "weft/parallel/rng.h"

namespace weft::io {

// Everything in a checkpoint but the tensors.
struct TrainState {
  int64_t step = 0;  // optimizer steps done
  uint64_t data_seed = 0;
  parallel::RngTracker::State rng{};  // this rank's streams
  Json config{};                      // the model + run config
  // The quantized recipes' scaling state of this rank (scaling_state.h);
  // null when the run has none. Loaded as the streams are: this rank's at
  // the saved layout, else rank 0's.
  Json scaling{};
  // The Hugging Face tokenizer.json the run trains with ("" for none):
  // written as DIR/tokenizer.json (checkpoint_tokenizer.h).
  std::string tokenizer{};
};

// Collective over `world` (every rank calls it); see the top of this file.
// `optimizer` may be null (no optimizer state is saved then).
void save_checkpoint(const std::string& dir, comm::ProcessGroup& world, const comm::Grid& grid,
                     nn::Module& model, optim::AdamW* optimizer, const TrainState& state);

// Collective over `world`: loads DIR into `model` (and `optimizer`, which may
// be null) at the current layout, which may differ from the saved one. The
// model's shape must be the checkpoint's (the error names the field). RNG
// streams: this rank's saved streams when the layout (world size, grid order
// and sizes) is the saved one; otherwise the saved streams of rank 0 with the
// model-parallel stream re-seeded for this TP rank (seed + 2718 + tp_rank) at
// the largest saved model-parallel offset, and a log line says so. A
// checkpoint without optimizer state (`weft checkpoint import`) resets the
// optimizer (zero moments, step 0). Without an optimizer (evaluation,
// generation, --init) only the weights are read: no rank<R>.json, and the
// returned state has no streams. Every byte read is checked against the
// checkpoint's checksums, and every value must be finite (`options`).
TrainState load_checkpoint(const std::string& dir, comm::ProcessGroup& world,
                           const comm::Grid& grid, nn::Module& model, optim::AdamW* optimizer,
                           ReadOptions options = {});

// {"vocab", "seq", "layers", "width", "heads", "vocab_pad"} of a GPT config:
// the model shape as checkpoints and configs spell it.
Json model_shape_json(const nn::GptConfig& cfg);
// `cfg` with the shape keys that `shape` has (others keep their values);
// "vocab-pad" is accepted for "vocab_pad", as configs spell it.
nn::GptConfig apply_model_shape(nn::GptConfig cfg, const Json& shape);

}  // namespace weft::io
