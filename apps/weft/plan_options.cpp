#include "plan_options.h"

#include "weft/io/json.h"
#include "weft/plan/machine.h"
#include "weft/train/plan_layout.h"

namespace weft {

namespace {
const char* const kShapeKeys[] = {"layers", "width",       "heads",     "kv-heads", "hidden",
                                  "vocab",  "moe-experts", "moe-top-k", "dropout"};
}  // namespace

void add_shape_options(cli::Options& opts) {
  opts.option("preset", "NAME", "llama-tiny",
              "model preset: tiny, gpt2-124m, gpt2-350m, llama-tiny, llama-1b, llama3-405b or "
              "moe-tiny; the shape options below override it")
      .option("seq", "T", "preset", "sequence length")
      .option("layers", "N", "preset", "transformer layers")
      .option("width", "C", "preset", "model width")
      .option("heads", "H", "preset", "attention heads")
      .option("kv-heads", "N", "preset", "key/value heads (grouped-query attention)")
      .option("hidden", "N", "preset", "MLP hidden size")
      .option("vocab", "V", "preset", "vocabulary size")
      .option("moe-experts", "N", "preset", "experts of each MoE layer (0: dense)")
      .option("moe-top-k", "K", "preset", "experts per token")
      .option("dropout", "P", "0", "dropout probability (its masks cost memory)");
}

train::TrainConfig shape_config(const cli::Options& opts, bool gpu) {
  io::Json s = io::Json::object();
  s["preset"] = opts.str("preset");
  for (const char* key : kShapeKeys)
    if (opts.given(key)) s[key] = opts.str(key);
  if (opts.given("seq")) s["seq"] = opts.str("seq");
  const std::string dtype = opts.given("dtype") ? opts.str("dtype") : gpu ? "bf16" : "f32";
  s["dtype"] = dtype;
  train::TrainConfig cfg;
  train::apply_settings(cfg, s, "");
  nn::validate(cfg.model, 1);
  return cfg;
}

plan::PlannedLayout pick_layout(const train::TrainConfig& cfg, int world, int64_t global_batch,
                                int64_t memory_limit, const std::string& limit_text) {
  const plan::Workload w = train::plan_workload(cfg);
  const plan::Machine machine =
      w.gpu ? plan::default_gpu_cluster() : plan::cpu_machine(w.compute, world);
  const plan::PlanResult r = plan::plan_layouts(
      {.workload = w, .world = world, .global_batch = global_batch, .memory_limit = memory_limit},
      machine);
  WEFT_CHECK(!r.fits.empty(),
             "no layout of {} ranks fits --memory-limit {}: the smallest needs {} per rank "
             "({}); raise the limit, add ranks or shrink the model",
             world, limit_text, plan::format_bytes(r.smallest.memory.total()),
             r.smallest.layout.text());
  return r.fits.front();
}

}  // namespace weft
