#include "weft/train/config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>
#include <type_traits>
#include <utility>

#include "weft/comm/world.h"
#include "weft/core/cuda.h"
#include "weft/parallel/gtp/runtime.h"
#include "weft/train/config_keys.h"

namespace weft::train {

namespace {

using namespace detail;

const std::vector<KeyDef>& key_defs() {
  static const std::vector<KeyDef> defs = [] {
    std::vector<KeyDef> d;
    d.push_back(
        {{"preset", "NAME", "tiny",
          "model preset: tiny (GPT-2 shape, 4 layers, width 128), gpt2-124m, gpt2-350m (24 layers, "
          "width 1024, 16 heads), llama-tiny (tiny's "
          "size as a Llama: RMSNorm, SwiGLU, rotary positions, 4 KV heads, no biases, untied "
          "head), llama-1b (TinyLlama-1.1B's shape), llama3-405b (Llama 3 405B's shape, for weft "
          "plan) or moe-tiny (llama-tiny with 4 experts, "
          "top-2); shape and architecture options override "
          "it"},
         [](TrainConfig& c, const io::Json& v, const Where& w) {
           apply_preset(c, to_choice(v, w, nn::gpt_preset_names()));
         },
         [](const TrainConfig& c) { return io::Json(c.preset); }});
    d.push_back(int_key({"layers", "N", "preset", "transformer layers"},
                        model_field(&nn::GptConfig::layers), 1));
    d.push_back(int_key({"width", "C", "preset", "model width (channels)"},
                        model_field(&nn::GptConfig::width), 1));
    d.push_back(int_key({"heads", "H", "preset", "attention heads (a multiple of --tp)"},
                        model_field(&nn::GptConfig::heads), 1));
    d.push_back(int_key({"seq", "T", "preset", "context length (tokens per sample)"},
                        model_field(&nn::GptConfig::seq), 1));
    d.push_back(int_key({"vocab", "V", "preset", "vocabulary size (256 for byte-level text)"},
                        model_field(&nn::GptConfig::vocab), 2));
    d.push_back(int_key({"vocab-pad", "N", "", "pad the token table to a multiple of N rows"},
                        model_field(&nn::GptConfig::vocab_pad), 1));
    d.push_back(number_key({"dropout", "P", "", "attention and residual dropout probability"},
                           model_field(&nn::GptConfig::dropout)));
    add_architecture_keys(d);
    d.push_back({{"dtype", "f32|bf16", "",
                  "compute type (master weights stay f32); the same as --precision f32|bf16, and "
                  "under a quantized --precision the activations' type (the FP8 GEMMs read "
                  "and write it)"},
                 [](TrainConfig& c, const io::Json& v, const Where& w) {
                   c.dtype_option = parse_dtype(to_choice(v, w, {"f32", "bf16"}));
                   if (!c.precision.quantized()) {
                     c.precision.recipe = parallel::Precision::of(*c.dtype_option).recipe;
                   }
                   c.precision.quantized_activations = *c.dtype_option;
                 },
                 [](const TrainConfig& c) {
                   return io::Json(std::string(dtype_name(c.compute_dtype())));
                 }});
    d.push_back(
        {{"precision", "RECIPE", "f32",
          "f32, bf16, or a quantized recipe for the Linear GEMMs (qkv, proj, fc1, fc2): "
          "fp8-delayed (per-tensor FP8 scales from an amax history, Transformer Engine's "
          "DelayedScaling), fp8-current (scales from the current amax), fp8-block (DeepSeek-V3's "
          "block scaling: a power-of-two f32 scale per 1x128 block of activations and gradients "
          "and per 128x128 tile of weights), mxfp8 (E4M3 in blocks "
          "of 32 with E8M0 scales), nvfp4 (E2M1 in blocks of 16, E4M3 block scales, an f32 "
          "tensor scale, Hadamard transform and stochastic rounding in the backward); on the "
          "CPU the quantized recipes are exact emulations (dequantized f32 GEMMs); their "
          "activations are f32, or bf16 with --dtype bf16"},
         [](TrainConfig& c, const io::Json& v, const Where& w) {
           c.precision.recipe = parallel::parse_recipe(to_choice(
               v, w, {"f32", "bf16", "fp8-delayed", "fp8-current", "fp8-block", "mxfp8", "nvfp4"}));
           if (c.dtype_option) c.precision.quantized_activations = *c.dtype_option;
         },
         [](const TrainConfig& c) { return io::Json(parallel::recipe_name(c.precision.recipe)); }});
    d.push_back(
        enum_key({"fp8-format", "hybrid|e4m3", "hybrid",
                  "fp8-delayed / fp8-current / fp8-block: E4M3 forward and E5M2 gradients "
                  "(hybrid) or E4M3 everywhere"},
                 &parallel::Precision::fp8_format,
                 {{"hybrid", parallel::Fp8Format::hybrid}, {"e4m3", parallel::Fp8Format::e4m3}}));
    d.push_back(int_key(
        {"amax-history", "N", "1024", "fp8-delayed: amax history length"},
        [](auto& c) -> auto& { return c.precision.amax_history; }, 1));
    d.push_back(enum_key(
        {"amax-algo", "max|most_recent", "max",
         "fp8-delayed: scale by the history's maximum or its most recent amax"},
        &parallel::Precision::amax_algo,
        {{"max", parallel::AmaxAlgo::max}, {"most_recent", parallel::AmaxAlgo::most_recent}}));
    d.push_back(int_key(
        {"fp8-margin", "N", "0", "fp8-delayed: scale = fp8_max / amax / 2^N (headroom for growth)"},
        [](auto& c) -> auto& { return c.precision.margin; }, 0));
    d.push_back(enum_key({"amax-group", "tp|tp-dp", "tp",
                          "fp8-delayed: reduce the amaxes over the TP group (with --gtp, TP x "
                          "GTP: one model replica) or over all ranks, once per step"},
                         &parallel::Precision::amax_group,
                         {{"tp", parallel::AmaxGroup::tp}, {"tp-dp", parallel::AmaxGroup::tp_dp}}));
    d.push_back(int_key({"tp", "N", "", "tensor-parallel size"}, &TrainConfig::tp, 1));
    d.push_back(int_key({"cp", "N", "",
                         "context-parallel size: each sequence split over N ranks in 2N "
                         "load-balanced chunks, attention exchanged between them (world = tp x "
                         "cp x ep x gtp x dp; --seq divisible by 2N)"},
                        &TrainConfig::cp, 1));
    d.push_back({{"cp-comm", "p2p|allgather|a2a", "",
                  "context parallelism's attention exchange: p2p (ring: keys and values "
                  "passed rank to rank while blocks compute), allgather (keys and values "
                  "all-gathered) or a2a (Ulysses all-to-all to head shards)"},
                 [](TrainConfig& c, const io::Json& v, const Where& w) {
                   c.cp_comm = to_choice(v, w, {"p2p", "allgather", "a2a"});
                 },
                 [](const TrainConfig& c) { return io::Json(c.cp_comm); }});
    d.push_back({{"dp", "N", "auto", "data-parallel size (auto: world / tp under mpirun, else 1)"},
                 [](TrainConfig& c, const io::Json& v, const Where& w) {
                   const bool is_auto = v.is_string() && v.as_string() == "auto";
                   c.dp = is_auto ? 0 : static_cast<int>(at_least(to_int(v, w), 1, w));
                 },
                 [](const TrainConfig& c) { return c.dp ? io::Json(c.dp) : io::Json("auto"); }});
    d.push_back(int_key({"gtp", "N", "",
                         "generalized tensor-parallel size: weights sharded 1/N, gathered just in "
                         "time (world = tp x ep x gtp x dp; gtp ranks see different data)"},
                        &TrainConfig::gtp, 1));
    d.push_back(int_key({"ep", "N", "",
                         "expert-parallel size: MoE experts split over N ranks, tokens exchanged "
                         "by all_to_all (world = tp x ep x gtp x dp; ep ranks see different data)"},
                        &TrainConfig::ep, 1));
    d.push_back(int_key({"pp", "N", "",
                         "pipeline-parallel size: the layers split into N stages of consecutive "
                         "layers (world = tp x ep x gtp x dp x pp; --grad-accum micro-batches "
                         "in flight)"},
                        &TrainConfig::pp, 1));
    d.push_back(string_key({"pp-layers", "N,N,...", "balanced",
                            "pipeline: each stage's layer count (they sum to the model's layers)"},
                           &TrainConfig::pp_layers));
    d.push_back({{"pp-schedule", "gpipe|1f1b|interleaved|zero-bubble", "1f1b",
                  "pipeline schedule: all forwards then all backwards, one forward one "
                  "backward, interleaved over --vpp virtual stages, or zero-bubble (ZB-H1)"},
                 [](TrainConfig& c, const io::Json& v, const Where& w) {
                   c.pp_schedule = to_choice(v, w, {"gpipe", "1f1b", "interleaved", "zero-bubble"});
                 },
                 [](const TrainConfig& c) { return io::Json(c.pp_schedule); }});
    d.push_back(
        int_key({"vpp", "V", "", "interleaved pipeline: virtual stages (model chunks) per rank"},
                &TrainConfig::vpp, 1));
    d.push_back(int_key({"gtp-cache", "N", "",
                         "GTP: gathered weights alive at once (2: the next layer's all-gather "
                         "runs while a layer computes; 1: no prefetch)"},
                        &TrainConfig::gtp_cache, 1));
    d.push_back({{"gtp-grad-accum", "shard|full", "",
                  "GTP with --grad-accum: shard (reduce-scatter every micro-batch into the "
                  "shard: less memory) or full (accumulate full gradients, reduce-scatter once "
                  "a step)"},
                 [](TrainConfig& c, const io::Json& v, const Where& w) {
                   c.gtp_grad_accum = to_choice(v, w, {"shard", "full"});
                 },
                 [](const TrainConfig& c) { return io::Json(c.gtp_grad_accum); }});
    d.push_back(choice_key(
        {"gtp-batch-experts", "on|off", "",
         "GTP with MoE: on gathers a MoE layer's local experts in one all-gather and "
         "reduce-scatters their gradients in one (all of them gathered at once); off: one "
         "expert at a time, one collective each"},
        [](auto& c) -> auto& { return c.gtp_batch_experts; }, {{"on", true}, {"off", false}}));
    d.push_back(string_key({"gtp-plan", "RULES", "all weights",
                            "GTP: weights kept whole, as pattern=replicate rules over the names "
                            "without .weight (wte=replicate,h.*.mlp=replicate)"},
                           &TrainConfig::gtp_plan));
    d.push_back({{"sp", "off|seq|batch", "",
                  "sequence parallelism: shard activations along the sequence or the batch"},
                 [](TrainConfig& c, const io::Json& v, const Where& w) {
                   c.sp = nn::parse_sequence_parallel(to_choice(v, w, {"off", "seq", "batch"}));
                 },
                 [](const TrainConfig& c) { return io::Json(nn::sequence_parallel_name(c.sp)); }});
    d.push_back(string_key(
        {"overlap", "CONFIG", "",
         "comm-GEMM overlap: off, on (Transformer Engine's defaults: ring for qkv/fc1 fprop and "
         "proj/fc2 dgrad, pipeline for proj/fc2 fprop, bulk for qkv/fc1 dgrad and wgrad), a list "
         "over the defaults (fc2_fprop=pipeline:8,qkv_fprop=off; comm_cores=N leaves N of a "
         "rank's threads to the transfers during an overlapped GEMM, default 0) or a JSON file"},
        &TrainConfig::overlap));
    d.push_back({{"backend", "auto|local|mpi|nccl", "",
                  "local: ranks are threads; mpi: one process per rank (start with mpirun); "
                  "nccl: one process per GPU under mpirun (--device cuda), GPU tensors over "
                  "NCCL and host values over MPI; auto: mpi under mpirun (nccl with --device "
                  "cuda), else local"},
                 [](TrainConfig& c, const io::Json& v, const Where& w) {
                   c.backend = to_choice(v, w, {"auto", "local", "mpi", "nccl"});
                 },
                 [](const TrainConfig& c) { return io::Json(c.backend); }});
    d.push_back({{"device", "cpu|cuda|cuda:N", "cpu",
                  "where the model runs: the CPU, or one NVIDIA GPU (a build with CUDA), which the "
                  "TP and DP ranks share as threads (under mpirun: one GPU per process, "
                  "--backend nccl); no --gtp or nvfp4 on a GPU yet"},
                 [](TrainConfig& c, const io::Json& v, const Where& w) {
                   const std::string s = to_string(v, w);
                   try {
                     (void)Device::parse(s);
                   } catch (const Error& e) {
                     WEFT_FAIL("{}: {}", w.label(), e.what());
                   }
                   c.device = s;
                 },
                 [](const TrainConfig& c) { return io::Json(c.device); }});
    d.push_back(number_key({"bucket-mb", "MB", "", "data-parallel gradient bucket size in MiB"},
                           &TrainConfig::bucket_mb));
    d.push_back(model_choice_key(
        {"recompute", "none|selective|full", "none",
         "activation recomputation: selective reruns the attention core (its output and "
         "probabilities) in the backward, full keeps only each layer's input and reruns the "
         "layer's forward in its backward; dropout replayed, results identical to none"},
        &nn::GptConfig::recompute,
        {{"none", nn::Recompute::none},
         {"selective", nn::Recompute::selective},
         {"full", nn::Recompute::full}}));
    d.push_back(int_key(
        {"recompute-layers", "K", "all", "--recompute applies to the first K layers (0: all)"},
        model_field(&nn::GptConfig::recompute_layers), 0));
    d.push_back(string_key({"data", "FILES", "fortunes",
                            "text files (byte tokens) or llm.c .bin token shards (GPT-2 uint16 or "
                            "llama-3 uint32), comma-separated, globs allowed "
                            "('data/*_train_*.bin'); with shards the vocabulary defaults to the "
                            "shards' tokenizer (50257 / 128256) unless --vocab or --preset says "
                            "otherwise (fortunes: Debian's fortunes corpus)"},
                           &TrainConfig::data));
    d.push_back(string_key({"val-data", "FILES", "",
                            "a separate validation set, as --data (llm.c's val shard); without "
                            "it the last --val-fraction of --data is held out"},
                           &TrainConfig::val_data));
    d.push_back(string_key({"tokenizer", "FILE|DIR", "beside the shards",
                            "a Hugging Face tokenizer.json (or its directory): the vocabulary, "
                            "stored in every checkpoint, and the text of --sample-prompt; "
                            "without it, the tokenizer.json beside --data's shards (weft data "
                            "prepare writes one), else the resumed checkpoint's"},
                           &TrainConfig::tokenizer));
    d.push_back(number_key({"val-fraction", "F", "", "share of the data held out for validation"},
                           &TrainConfig::val_fraction));
    d.push_back(
        int_key({"steps", "N", "", "optimizer steps of the whole run"}, &TrainConfig::steps, 1));
    d.push_back(int_key({"stop-at", "STEP", "",
                         "end this run at STEP (checkpoint, sample) with the schedule of --steps, "
                         "to --resume later (0: at --steps)"},
                        &TrainConfig::stop_at, 0));
    d.push_back(
        int_key({"micro-batch", "B", "", "sequences per micro-batch per data-parallel rank"},
                &TrainConfig::micro_batch, 1));
    d.push_back(int_key({"grad-accum", "N", "", "micro-batches accumulated per optimizer step"},
                        &TrainConfig::grad_accum, 1));
    d.push_back(optional_int_key(
        {"global-batch", "N", "none",
         "sequences per optimizer step, kept when the layout changes: the micro-batch becomes "
         "N / (dp x --grad-accum) (overriding --micro-batch), so a run resumed at another --dp "
         "sees the same batches"},
        &TrainConfig::global_batch, 1));
    d.push_back(optional_number_key(
        {"lr", "LR", "preset", "peak learning rate (tiny 6e-3, gpt2-124m 6e-4 as llm.c)"},
        &TrainConfig::lr));
    d.push_back(optional_number_key(
        {"min-lr", "LR", "lr/10", "learning rate at the end of the cosine decay"},
        &TrainConfig::min_lr));
    d.push_back(optional_int_key({"schedule-steps", "N", "steps",
                                  "steps the learning-rate schedule spans (a resumed run keeps "
                                  "its saved one unless --reset-schedule)"},
                                 &TrainConfig::schedule_steps, 1));
    d.push_back(optional_int_key(
        {"warmup", "N", "preset",
         "steps of linear learning-rate warmup (default: half the schedule, at most 100 for "
         "tiny and 700 for gpt2-124m, as llm.c)"},
        &TrainConfig::warmup, 0));
    d.push_back(number_key({"weight-decay", "WD", "", "AdamW weight decay (2-D weights only)"},
                           &TrainConfig::weight_decay));
    d.push_back(number_key({"grad-clip", "NORM", "", "clip the global gradient norm (0: off)"},
                           &TrainConfig::grad_clip));
    d.push_back({{"seed", "S", "", "seed of initialization, data order and dropout"},
                 [](TrainConfig& c, const io::Json& v, const Where& w) {
                   c.seed = static_cast<uint64_t>(at_least(to_int(v, w), 0, w));
                 },
                 [](const TrainConfig& c) { return io::Json(c.seed); }});
    d.push_back(string_key({"save", "DIR", "none",
                            "checkpoint to DIR/step-NNNNNN at the end (and on SIGINT/SIGTERM); "
                            "a rerun resumes the checkpoint of the same run there"},
                           &TrainConfig::save));
    d.push_back(
        int_key({"save-every", "N", "", "also checkpoint every N steps (0: only at the end)"},
                &TrainConfig::save_every, 0));
    d.push_back(int_key({"keep", "N", "", "step checkpoints kept in the --save directory (0: all)"},
                        &TrainConfig::keep, 0));
    d.push_back(string_key({"resume", "DIR", "none",
                            "continue the run saved in DIR (a --save directory or one of its "
                            "step-* checkpoints) with its settings, options overriding them"},
                           &TrainConfig::resume));
    d.push_back(string_key({"init", "FILE|DIR", "none",
                            "start from these weights (a GPT-2 .safetensors file or a checkpoint) "
                            "at step 0 with a fresh optimizer"},
                           &TrainConfig::init));
    d.push_back(
        int_key({"eval-every", "N", "", "validation loss every N steps (0: only at the end)"},
                &TrainConfig::eval_every, 0));
    d.push_back(int_key({"eval-batches", "N", "", "validation batches per evaluation"},
                        &TrainConfig::eval_batches, 1));
    d.push_back(
        string_key({"metrics", "FILE", "none",
                    "one JSON line per step (a resumed run drops the lines past its checkpoint "
                    "and appends)"},
                   &TrainConfig::metrics));
    d.push_back(string_key({"tensorboard", "DIR", "none",
                            "TensorBoard event file in DIR (loss, val_loss, lr, grad_norm, "
                            "tokens_per_s per step; view with tensorboard --logdir DIR)"},
                           &TrainConfig::tensorboard));
    d.push_back(int_key({"log-every", "N", "", "progress line every N steps (0: none)"},
                        &TrainConfig::log_every, 0));
    d.push_back(int_key({"sample-tokens", "N", "", "tokens of text generated at the end (0: none)"},
                        &TrainConfig::sample_tokens, 0));
    d.push_back(string_key({"sample-prompt", "TEXT", "a newline", "prompt of the generated sample"},
                           &TrainConfig::sample_prompt));
    return d;
  }();
  return defs;
}

const KeyDef* find_def(const std::string& name) {
  const std::string key = canonical_key(name);
  for (const KeyDef& d : key_defs())
    if (d.key.name == key) return &d;
  return nullptr;
}

}  // namespace

const std::vector<ConfigKey>& train_config_keys() {
  static const std::vector<ConfigKey> keys = [] {
    std::vector<ConfigKey> k;
    const TrainConfig defaults;
    for (const KeyDef& d : key_defs()) {
      k.push_back(d.key);
      // Keys without a fallback text show the default TrainConfig's value.
      if (k.back().fallback.empty()) {
        const io::Json v = d.get(defaults);
        k.back().fallback = v.is_string() ? v.as_string() : v.dump();
      }
    }
    return k;
  }();
  return keys;
}

std::string canonical_key(const std::string& name) {
  std::string key = name;
  std::replace(key.begin(), key.end(), '_', '-');
  for (const KeyDef& d : key_defs())
    if (d.key.name == key) return key;
  return {};
}

double TrainConfig::lr_value() const { return lr ? *lr : preset_schedule(preset).lr; }

int64_t TrainConfig::warmup_steps() const {
  if (warmup) return *warmup;
  // Half of a short run: a run of 30 steps warmed up over 1 step (steps/20)
  // spiked from 3.4 to 7.5 at step 8.
  return std::min(preset_schedule(preset).max_warmup, schedule_total() / 2);
}

io::Json TrainConfig::to_json() const {
  io::Json out = io::Json::object();
  for (const KeyDef& d : key_defs()) out[d.key.name] = d.get(*this);
  return out;
}

void apply_settings(TrainConfig& cfg, const io::Json& settings, const std::string& source) {
  WEFT_CHECK(settings.is_object(), "{}: expected a JSON object of settings, got {}",
             source.empty() ? "settings" : source, io::json_type_name(settings.type()));
  // The preset first: the shape keys next to it override it.
  if (const io::Json* p = settings.find("preset")) {
    const std::string key = "preset";
    find_def(key)->set(cfg, *p, Where{key, source});
  }
  for (const auto& [name, value] : settings.as_object()) {
    const KeyDef* d = find_def(name);
    WEFT_CHECK(d, "{}: unknown setting '{}'; see `weft train --help` for the keys",
               source.empty() ? "settings" : source, name);
    if (d->key.name == "preset") continue;
    d->set(cfg, value, Where{d->key.name, source});
  }
}

io::Json resumable_settings(const io::Json& settings) {
  static const char* const kPerRun[] = {"dp", "backend", "device", "resume", "init", "stop-at"};
  io::Json out = io::Json::object();
  if (!settings.is_object()) return out;
  for (const auto& [name, value] : settings.as_object()) {
    const std::string key = canonical_key(name);
    if (key.empty()) continue;
    if (std::find(std::begin(kPerRun), std::end(kPerRun), key) != std::end(kPerRun)) continue;
    out[key] = value;
  }
  return out;
}

}  // namespace weft::train
