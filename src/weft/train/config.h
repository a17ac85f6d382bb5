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
#include "weft/io/json.h"
#include "weft/nn/gpt.h"
#include "weft/parallel/context.h"

namespace weft::train {

struct TrainConfig {
  // Model: the preset it started from and its shape (vocab, seq, layers,
  // width, heads, dropout, vocab_pad). The model's tp, sp, compute and seed
  // are not set here: they are the run's (tp, sp, dtype, seed below), and
  // model_config() puts them in.
  std::string preset = "tiny";
  nn::GptConfig model = nn::gpt_preset("tiny");
  // The precision recipe and its options (--precision, --fp8-format,
  // --amax-history, --amax-algo, --fp8-margin, --amax-group): the one record
  // of the compute type. --dtype f32|bf16 sets the recipe f32|bf16 (unless a
  // quantized recipe is set; validate() then refuses a bf16 --dtype).
  parallel::Precision precision{};
  std::optional<DType> dtype_option{};  // --dtype as given
  // The compute type: bf16 under the bf16 recipe, f32 otherwise (the
  // quantized recipes compute in f32).
  DType compute_dtype() const { return precision.activation(); }
  // Layout: world = tp · cp · ep · gtp · dp ranks.
  int tp = 2;
  // Context parallelism: every sequence split over the cp group in 2·cp
  // chunks (parallel/context/), attention exchanged by cp_comm.
  int cp = 1;
  std::string cp_comm = "p2p";  // p2p | allgather | a2a
  int dp = 0;                   // 0: the world size / (tp · gtp) (1 on the local backend)
  // Generalized tensor parallelism: weights sharded 1/gtp over the gtp
  // group, whose ranks see different data as data-parallel ranks do.
  int gtp = 1;
  // Expert parallelism: MoE layers' experts split over the ep group, whose
  // ranks see different data as data-parallel ranks do.
  int ep = 1;
  // Pipeline parallelism (parallel/pipeline/): pp stages of consecutive
  // layers; pp_layers "3,5" sets each stage's count (empty: balanced);
  // pp_schedule gpipe | 1f1b | interleaved | zero-bubble; vpp virtual stages
  // per rank (interleaved only). grad_accum is the micro-batches in flight.
  int pp = 1;
  std::string pp_layers{};
  std::string pp_schedule = "1f1b";
  int vpp = 1;
  int gtp_cache = 2;                     // gathered weights alive at once (1: no prefetch)
  std::string gtp_grad_accum = "shard";  // shard | full (parallel/gtp/options.h)
  bool gtp_batch_experts = true;         // a MoE layer's experts in one gather (options.h)
  std::string gtp_plan{};                // weights left whole: "wte=replicate,h.*.mlp=replicate"
  nn::SequenceParallel sp = nn::SequenceParallel::off;
  // Comm-GEMM overlap (overlap_config): off, on, a list or a JSON file.
  std::string overlap = "off";
  std::string backend = "auto";  // auto (mpi under mpirun, else local), local, mpi
  std::string device = "cpu";    // cpu, cuda, cuda:N (Device::parse)
  double bucket_mb = 25;
  // --distributed-optimizer (a flag, like --overwrite: not a saved setting,
  // so a run resumes with or without it): AdamW's moments sharded over the
  // data ranks, gradients reduce-scattered (optim/distributed_optimizer.h).
  bool distributed_optimizer = false;
  // Data: empty = the default corpus (Debian's fortunes).
  // Comma-separated files and globs (see data.h).
  std::string data{};
  // A separate validation set; empty: the last val_fraction of `data`.
  std::string val_data{};
  // A Hugging Face tokenizer.json (or its directory) for text in and out;
  // empty: the one beside --data's shards, else the checkpoint's, else none.
  std::string tokenizer{};
  // Its text, as run_training found it (not a key): saved in every checkpoint.
  std::string tokenizer_json{};
  double val_fraction = 0.1;
  // Optimization. micro_batch is per data-parallel replica: a step sees
  // micro_batch · dp · grad_accum sequences.
  int64_t steps = 800;
  int64_t stop_at =
      0;  // end this invocation at this step (0: at `steps`); the schedule keeps `steps`
  int64_t micro_batch = 16;
  int64_t grad_accum = 1;
  std::optional<double> lr{};  // the preset's when unset (lr_value())
  // Sequences per optimizer step, pinned across layouts (apply_global_batch).
  std::optional<int64_t> global_batch{};
  std::optional<double> min_lr{};   // lr / 10 when unset
  std::optional<int64_t> warmup{};  // warmup_steps() when unset
  // Steps the learning-rate schedule spans (unset: `steps`); a resumed run
  // given another --steps keeps its saved schedule this way.
  std::optional<int64_t> schedule_steps{};
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // 0: no clipping
  uint64_t seed = 1337;
  // Checkpoints.
  std::string save{};      // a run directory: step-NNNNNN checkpoints and `latest`
  int64_t save_every = 0;  // 0: only at the end (and when stopped by a signal)
  int64_t keep = 3;        // step checkpoints kept in `save` (0: all)
  std::string resume{};
  std::string init{};  // weights to start from: a .safetensors GPT-2 file or a checkpoint
  // Evaluation and output.
  int64_t eval_every = 100;
  int64_t eval_batches = 8;
  std::string metrics{};
  std::string tensorboard{};  // TensorBoard event files go to this directory
  int64_t log_every = 50;
  int64_t sample_tokens = 300;
  std::string sample_prompt{};
  // Switches of one invocation (the command line's --overwrite and
  // --reset-schedule), neither keys nor saved.
  bool overwrite = false;       // replace another run's checkpoint in `save`
  bool reset_schedule = false;  // resumed with another --steps: the schedule spans the new one

  // The settings as a JSON object of keys (what checkpoints store).
  io::Json to_json() const;
  // The step this invocation ends at.
  int64_t last_step() const { return stop_at > 0 ? std::min(stop_at, steps) : steps; }
  int64_t schedule_total() const { return schedule_steps ? *schedule_steps : steps; }
  // The peak learning rate: --lr, else the preset's (tiny 6e-3, gpt2-124m 6e-4).
  double lr_value() const;
  // --warmup, else half the schedule, at most the preset's cap (100 for tiny,
  // 700 for gpt2-124m).
  int64_t warmup_steps() const;
  double min_lr_value() const { return min_lr ? *min_lr : lr_value() / 10; }
  // Global sequences per optimizer step, given the data-parallel size (the
  // ranks that see different data: ep · gtp · dp).
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
// With --global-batch: the micro-batch that gives it at data-parallel size
// `dp` and c.grad_accum (an error when it does not divide evenly).
void apply_global_batch(TrainConfig& c, int dp);

// "micro_batch" -> "micro-batch"; empty when `name` is no key.
std::string canonical_key(const std::string& name);

// Applies the members of `settings` (an object) on top of `cfg`. `source`
// names where they came from for messages ("run.json"; empty: the command
// line, so messages say "--steps"). Unknown keys
// and values of the wrong type or range are a weft::Error naming the key.
void apply_settings(TrainConfig& cfg, const io::Json& settings, const std::string& source);
// The members of `settings` that are keys (a checkpoint's saved configuration
// without the settings that belong to one invocation only: dp and backend,
// which follow how weft was started, resume and init paths, stop-at). --tp,
// --sp, --save, --save-every and --metrics carry over, so a resumed run keeps
// its layout and writes where the saved one did.
io::Json resumable_settings(const io::Json& settings);

// A checkpoint's saved settings carry {kPathsKey: kPathsRelativeToCheckpoint}
// when their relative paths are relative to the checkpoint directory (older
// checkpoints stored them as given, relative to the working directory).
inline constexpr const char* kPathsKey = "paths";
inline constexpr const char* kPathsRelativeToCheckpoint = "relative to this checkpoint";

// Keys whose values are paths: data, save, resume, init, metrics, tokenizer.
bool is_path_key(const std::string& key);
// `settings` with each relative path resolved against `base` (the directory
// of the file they were read from): how --config files and checkpoints
// spell paths.
io::Json resolve_paths(const io::Json& settings, const std::string& base);
// `settings` with each relative path (relative to the working directory)
// rewritten relative to `base`: what a checkpoint in `base` stores.
io::Json relative_paths(const io::Json& settings, const std::string& base);

// Checks the settings against each other; the message names the option to
// change. The model-shape rules are nn::validate's (its field names become
// the options: "--heads 4 is not divisible by --tp 3").
void validate(const TrainConfig& cfg);

// The model-shape members of `settings` (layers, width, heads, seq, vocab,
// vocab-pad): what --init takes from the weights it starts from.
io::Json shape_settings(const io::Json& settings);

// The config saved with a checkpoint directory (TrainState::config) with the
// model shape keys of model_shape_json() set from the saved model (where the
// config spells a key with dashes, "vocab-pad", that key is set) and its
// relative paths resolved against the checkpoint directory; for a
// .safetensors file, io::hf_config(file). `path` may name a --save directory
// (its latest checkpoint, io/checkpoint_dir.h). Reads no tensor.
io::Json read_checkpoint_config(const std::string& path);

// The model shape of `cfg` (cfg.model), as nn::Gpt takes it.
nn::GptConfig model_config(const TrainConfig& cfg);
// The overlap configuration a --overlap value names: "off", "on" (Transformer
// Engine's defaults), "qkv_fprop=ring,fc2_fprop=pipeline:8,..." over the
// defaults, or the path of a JSON file {"fc2_fprop": {"method": "pipeline",
// "num_splits": 8}, ...}, also over the defaults.
parallel::OverlapConfig overlap_config(const std::string& text);
// The parallel context of the run's model over its TP group (null: TP=1):
// the run's sequence parallelism, precision and seed, and generalized
// tensor parallelism over `gtp` (null or one rank: off). The one place a
// run's parallel options reach the model.
parallel::ContextPtr model_context(const TrainConfig& cfg, std::shared_ptr<comm::ProcessGroup> tp,
                                   std::shared_ptr<comm::ProcessGroup> dp = nullptr,
                                   std::shared_ptr<comm::ProcessGroup> gtp = nullptr,
                                   std::shared_ptr<comm::ProcessGroup> ep = nullptr,
                                   std::shared_ptr<comm::ProcessGroup> cp = nullptr);

}  // namespace weft::train
