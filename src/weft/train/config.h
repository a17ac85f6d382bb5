// TrainConfig: everything a training run is made of, and the one table of
// settings ("keys") that the command line, --config files and checkpoints
// share.
//
// A key is spelled as its command-line option without the dashes
// ("micro-batch"; "micro_batch" is accepted too). Settings are applied in
// layers, later layers winning: the defaults, the configuration saved in a
// checkpoint being resumed, a --config JSON file, the command line. A value
// may be given as its JSON type or as the text the command line would take
// ("20" for 20), so every layer goes through the same checks.
//
// Shape. The model shape starts from `preset` and each shape key given in
// any layer (layers, width, heads, seq, vocab, vocab-pad) overrides it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "weft/core/dtype.h"
#include "weft/nn/gpt.h"
#include "weft/train/json.h"

namespace weft::train {

struct TrainConfig {
  // Model.
  std::string preset = "tiny";
  int64_t layers = 4;
  int64_t width = 128;
  int64_t heads = 4;
  int64_t seq = 128;
  int64_t vocab = 256;
  int64_t vocab_pad = nn::kDefaultVocabPad;
  float dropout = 0.0f;
  DType dtype = DType::f32;
  // Layout: world = tp · dp ranks.
  int tp = 2;
  int dp = 0;  // 0: the world size / tp (1 on the local backend)
  nn::SequenceParallel sp = nn::SequenceParallel::off;
  std::string backend = "auto";  // auto (mpi under mpirun, else local), local, mpi
  double bucket_mb = 25;
  // Data: empty = the default corpus (Debian's fortunes).
  // Comma-separated files and globs (see data.h).
  std::string data{};
  // A separate validation set; empty: the last val_fraction of `data`.
  std::string val_data{};
  double val_fraction = 0.1;
  // Optimization. micro_batch is per data-parallel replica: a step sees
  // micro_batch · dp · grad_accum sequences.
  int64_t steps = 800;
  int64_t stop_at =
      0;  // end this invocation at this step (0: at `steps`); the schedule keeps `steps`
  int64_t micro_batch = 16;
  int64_t grad_accum = 1;
  double lr = 6e-3;
  std::optional<double> min_lr{};   // lr / 10 when unset
  std::optional<int64_t> warmup{};  // steps / 20 when unset
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // 0: no clipping
  uint64_t seed = 1337;
  // Checkpoints.
  std::string save{};
  int64_t save_every = 0;  // 0: only at the end
  std::string resume{};
  std::string init{};  // weights to start from: a .safetensors GPT-2 file or a checkpoint
  // Evaluation and output.
  int64_t eval_every = 100;
  int64_t eval_batches = 8;
  std::string metrics{};
  int64_t log_every = 50;
  int64_t sample_tokens = 300;
  std::string sample_prompt{};

  // The settings as a JSON object of keys (what checkpoints store).
  Json to_json() const;
  // The step this invocation ends at.
  int64_t last_step() const { return stop_at > 0 ? std::min(stop_at, steps) : steps; }
  int64_t warmup_steps() const { return warmup ? *warmup : steps / 20; }
  double min_lr_value() const { return min_lr ? *min_lr : lr / 10; }
  // Global sequences per optimizer step, given the data-parallel size.
  int64_t sequences_per_step(int dp_size) const { return micro_batch * dp_size * grad_accum; }
};

// One setting: its key, how --help shows it and its default as text.
struct ConfigKey {
  std::string name{};
  std::string metavar{};
  std::string fallback{};
  std::string help{};
};
// Every key, in --help order.
const std::vector<ConfigKey>& train_config_keys();
// "micro_batch" -> "micro-batch"; empty when `name` is no key.
std::string canonical_key(const std::string& name);

// Applies the members of `settings` (an object) on top of `cfg`. `source`
// names where they came from for messages ("run.json"; empty: the command
// line, so messages say "--steps"). Unknown keys
// and values of the wrong type or range are a weft::Error naming the key.
void apply_settings(TrainConfig& cfg, const Json& settings, const std::string& source);
// The members of `settings` that are keys (a checkpoint's saved configuration
// without the settings that belong to one run only: layout, backend,
// resume/init/save paths, the metrics file, stop-at).
Json resumable_settings(const Json& settings);

// Checks the settings against each other; the message names the option to change.
void validate(const TrainConfig& cfg);

// The model-shape members of `settings` (layers, width, heads, seq, vocab,
// vocab-pad): what --init takes from the weights it starts from.
Json shape_settings(const Json& settings);

// The model of `cfg` with the TP group `tp` (null: TP=1), as nn::Gpt takes it.
nn::GptConfig model_config(const TrainConfig& cfg, std::shared_ptr<comm::ProcessGroup> tp);

}  // namespace weft::train
