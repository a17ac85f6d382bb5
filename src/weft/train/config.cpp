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

namespace weft::train {

namespace {

// Where a value came from, for messages: "--steps" on the command line (an
// empty source), "run.json: steps" elsewhere.
struct Where {
  const std::string& key;
  const std::string& source;
  std::string label() const { return source.empty() ? "--" + key : source + ": " + key; }
};

std::string spell(const io::Json& v) {
  return v.is_string() ? "'" + v.as_string() + "'" : v.dump();
}

int64_t to_int(const io::Json& v, const Where& w) {
  if (v.is_integer()) return v.as_int();
  if (v.is_string()) {
    const std::string& s = v.as_string();
    int64_t out = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec == std::errc() && end == s.data() + s.size() && !s.empty()) return out;
  }
  WEFT_FAIL("{} expects an integer, got {}", w.label(), spell(v));
}

double to_double(const io::Json& v, const Where& w) {
  if (v.is_number()) return v.as_double();
  if (v.is_string()) {
    const std::string& s = v.as_string();
    try {
      size_t used = 0;
      double out = std::stod(s, &used);
      if (used == s.size() && std::isfinite(out)) return out;
    } catch (const std::exception&) {
    }
  }
  WEFT_FAIL("{} expects a number, got {}", w.label(), spell(v));
}

std::string to_string(const io::Json& v, const Where& w) {
  WEFT_CHECK(v.is_string(), "{} expects a string, got {}", w.label(), v.dump());
  return v.as_string();
}

std::string to_choice(const io::Json& v, const Where& w, const std::vector<std::string>& choices) {
  std::string s = to_string(v, w);
  if (std::find(choices.begin(), choices.end(), s) != choices.end()) return s;
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
  WEFT_FAIL("{} must be one of {}; got '{}'", w.label(), list, s);
}

int64_t at_least(int64_t n, int64_t lo, const Where& w) {
  WEFT_CHECK(n >= lo, "{} must be at least {}, got {}", w.label(), lo, n);
  return n;
}

double non_negative(double x, const Where& w) {
  WEFT_CHECK(x >= 0, "{} must not be negative, got {}", w.label(), x);
  return x;
}

using Setter = std::function<void(TrainConfig&, const io::Json&, const Where&)>;
using Getter = std::function<io::Json(const TrainConfig&)>;

struct KeyDef {
  ConfigKey key;
  Setter set;
  Getter get;
};

// What a preset trains with when the options do not say: the peak learning
// rate, and the longest default warmup (llm.c's 700 steps for GPT-2 124M).
struct PresetSchedule {
  double lr;
  int64_t max_warmup;
};

PresetSchedule preset_schedule(const std::string& preset) {
  if (preset == "gpt2-124m") return {6e-4, 700};
  if (preset == "gpt2-350m") return {3e-4, 700};  // GPT-3 Medium's peak rate
  if (preset == "llama-1b") return {4e-4, 700};   // TinyLlama's peak rate
  return {6e-3, 100};
}

void apply_preset(TrainConfig& c, const std::string& name) {
  nn::GptConfig shape = nn::gpt_preset(name);
  // A preset is a shape: the dropout and partition plan set elsewhere stay.
  shape.dropout = c.model.dropout;
  shape.plan = c.model.plan;
  c.preset = name;
  c.model = std::move(shape);
}

// The keys reach their members through std::invoke: a member pointer of
// TrainConfig, or model_field(&nn::GptConfig::m) for a member of its model.
template <typename T>
auto model_field(T nn::GptConfig::*m) {
  return [m](auto& c) -> auto& { return c.model.*m; };
}
template <typename Field>
using FieldType = std::remove_cvref_t<std::invoke_result_t<Field, TrainConfig&>>;

// Integer key with a lower bound, stored in `field`.
template <typename Field>
KeyDef int_key(ConfigKey key, Field field, int64_t lo) {
  using T = FieldType<Field>;
  return {std::move(key),
          [field, lo](TrainConfig& c, const io::Json& v, const Where& w) {
            const int64_t n = at_least(to_int(v, w), lo, w);
            // A value the setting cannot hold (--tp 4294967298 into an int)
            // is refused, not wrapped around.
            WEFT_CHECK(std::in_range<T>(n), "{} must be at most {}, got {}", w.label(),
                       std::numeric_limits<T>::max(), n);
            std::invoke(field, c) = static_cast<T>(n);
          },
          [field](const TrainConfig& c) {
            return io::Json(static_cast<int64_t>(std::invoke(field, c)));
          }};
}

template <typename Field>
KeyDef number_key(ConfigKey key, Field field) {
  using T = FieldType<Field>;
  return {std::move(key),
          [field](TrainConfig& c, const io::Json& v, const Where& w) {
            std::invoke(field, c) = static_cast<T>(non_negative(to_double(v, w), w));
          },
          [field](const TrainConfig& c) {
            return io::Json(static_cast<double>(std::invoke(field, c)));
          }};
}

// A key that may be unset (null: the default its help text names), an
// integer with a lower bound or a non-negative number.
KeyDef optional_int_key(ConfigKey key, std::optional<int64_t> TrainConfig::*m, int64_t lo) {
  return {std::move(key),
          [m, lo](TrainConfig& c, const io::Json& v, const Where& w) {
            if (v.is_null()) {
              (c.*m).reset();
            } else {
              c.*m = at_least(to_int(v, w), lo, w);
            }
          },
          [m](const TrainConfig& c) { return c.*m ? io::Json(*(c.*m)) : io::Json(nullptr); }};
}

KeyDef optional_number_key(ConfigKey key, std::optional<double> TrainConfig::*m) {
  return {std::move(key),
          [m](TrainConfig& c, const io::Json& v, const Where& w) {
            if (v.is_null()) {
              (c.*m).reset();
            } else {
              c.*m = non_negative(to_double(v, w), w);
            }
          },
          [m](const TrainConfig& c) { return c.*m ? io::Json(*(c.*m)) : io::Json(nullptr); }};
}

// A setting spelled as one of `names`, stored in `field` (a callable giving
// the member of a TrainConfig, as model_field's).
template <typename Field, typename E = FieldType<Field>>
KeyDef choice_key(ConfigKey key, Field field, std::vector<std::pair<std::string, E>> names) {
  return {std::move(key),
          [field, names](TrainConfig& c, const io::Json& v, const Where& w) {
            std::vector<std::string> choices;
            for (const auto& n : names) choices.push_back(n.first);
            const std::string s = to_choice(v, w, choices);
            for (const auto& [name, value] : names) {
              if (name == s) std::invoke(field, c) = value;
            }
          },
          [field, names](const TrainConfig& c) {
            for (const auto& [name, value] : names) {
              if (std::invoke(field, c) == value) return io::Json(name);
            }
            return io::Json(nullptr);
          }};
}

// A setting of the precision recipe, or an architecture choice of the model.
template <typename E>
KeyDef enum_key(ConfigKey key, E parallel::Precision::*m,
                std::vector<std::pair<std::string, E>> names) {
  return choice_key(
      std::move(key), [m](auto& c) -> auto& { return c.precision.*m; }, std::move(names));
}
template <typename E>
KeyDef model_choice_key(ConfigKey key, E nn::GptConfig::*m,
                        std::vector<std::pair<std::string, E>> names) {
  return choice_key(std::move(key), model_field(m), std::move(names));
}

// on|off, or a JSON boolean (as checkpoints' model shapes spell it).
KeyDef model_switch_key(ConfigKey key, bool nn::GptConfig::*m) {
  KeyDef def = model_choice_key(std::move(key), m, {{"on", true}, {"off", false}});
  def.set = [m, choice = def.set](TrainConfig& c, const io::Json& v, const Where& w) {
    if (v.is_bool()) {
      c.model.*m = v.as_bool();
    } else {
      choice(c, v, w);
    }
  };
  return def;
}

// The architecture options: what makes a model GPT-2 or Llama beyond its shape.
void add_architecture_keys(std::vector<KeyDef>& d) {
  d.push_back(int_key({"kv-heads", "N", "preset",
                       "key/value heads (grouped-query attention): a divisor of --heads, and a "
                       "multiple of --tp or a divisor of it (each head replicated on "
                       "tp/kv-heads ranks, not with --gtp); 0: --heads"},
                      model_field(&nn::GptConfig::kv_heads), 0));
  d.push_back(int_key({"hidden", "N", "preset", "MLP hidden size; 0: 4 x --width"},
                      model_field(&nn::GptConfig::hidden), 0));
  d.push_back(model_choice_key(
      {"norm", "layernorm|rmsnorm", "preset", "the blocks' and the final norm"},
      &nn::GptConfig::norm, {{"layernorm", nn::NormKind::layer}, {"rmsnorm", nn::NormKind::rms}}));
  d.push_back(number_key({"norm-eps", "X", "preset", "the norms' epsilon"},
                         model_field(&nn::GptConfig::norm_eps)));
  d.push_back(model_choice_key(
      {"mlp", "gelu|swiglu", "preset",
       "the MLP: fc1 then GELU (GPT-2), or silu(gate) x up (SwiGLU, Llama)"},
      &nn::GptConfig::mlp, {{"gelu", nn::MlpKind::gelu}, {"swiglu", nn::MlpKind::swiglu}}));
  d.push_back(model_choice_key(
      {"positions", "learned|rotary", "preset",
       "a learned position table (GPT-2's wpe) or rotary positions inside attention (Llama)"},
      &nn::GptConfig::positions,
      {{"learned", nn::PositionKind::learned}, {"rotary", nn::PositionKind::rotary}}));
  d.push_back(number_key({"rope-theta", "X", "preset", "rotary positions' base"},
                         model_field(&nn::GptConfig::rope_theta)));
  d.push_back(model_switch_key({"bias", "on|off", "preset", "biases in the Linear layers"},
                               &nn::GptConfig::bias));
  d.push_back(model_switch_key(
      {"tied-head", "on|off", "preset", "the LM head reads the token table (off: its own weight)"},
      &nn::GptConfig::tied_head));
  // Mixture of experts (nn/moe_mlp.h).
  d.push_back(int_key({"moe-experts", "N", "preset", "experts per MoE layer; 0: dense MLPs"},
                      model_field(&nn::GptConfig::moe_experts), 0));
  d.push_back(int_key({"moe-top-k", "K", "preset", "experts per token: 1 (Switch) or 2 (Mixtral)"},
                      model_field(&nn::GptConfig::moe_top_k), 1));
  d.push_back(int_key({"moe-every", "N", "preset", "every N-th layer is MoE; 1: all"},
                      model_field(&nn::GptConfig::moe_every), 1));
  d.push_back(number_key(
      {"moe-capacity-factor", "X", "preset", "expert capacity / even share (0: dropless)"},
      model_field(&nn::GptConfig::moe_capacity_factor)));
  d.push_back(number_key({"moe-aux-coef", "X", "preset", "load-balancing loss weight (0.01)"},
                         model_field(&nn::GptConfig::moe_aux_coef)));
  d.push_back(number_key({"moe-z-coef", "X", "preset", "router z-loss weight; 0: off (try 0.001)"},
                         model_field(&nn::GptConfig::moe_z_coef)));
}

KeyDef string_key(ConfigKey key, std::string TrainConfig::*m) {
  return {std::move(key),
          [m](TrainConfig& c, const io::Json& v, const Where& w) { c.*m = to_string(v, w); },
          [m](const TrainConfig& c) { return io::Json(c.*m); }};
}

const std::vector<KeyDef>& key_defs() {
  static const std::vector<KeyDef> defs = [] {
    std::vector<KeyDef> d;
    d.push_back(
        {{"preset", "NAME", "tiny",
          "model preset: tiny (GPT-2 shape, 4 layers, width 128), gpt2-124m, gpt2-350m (24 layers, "
          "width 1024, 16 heads), llama-tiny (tiny's "
          "size as a Llama: RMSNorm, SwiGLU, rotary positions, 4 KV heads, no biases, untied "
          "head), llama-1b (TinyLlama-1.1B's shape) or moe-tiny (llama-tiny with 4 experts, "
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
