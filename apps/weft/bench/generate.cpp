// weft bench generate: greedy generation with the key/value cache against
// the recomputing path (the whole window again for every token, as llm.c's
// sampling loop does) on the same prompt, in alternating rounds.
#include "weft/infer/generate.h"

#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "../cli.h"
#include "timing.h"
#include "weft/core/threads.h"
#include "weft/kernels/cpu_support.h"
#include "weft/parallel/context.h"

namespace weft {
namespace {

cli::Options run_options() {
  cli::Options opts(
      "weft bench generate --preset P --prompt-tokens N --tokens M [options]",
      "Times greedy generation of --tokens new tokens after a prompt of --prompt-tokens\n"
      "(random ids, fixed seed) on a model of the preset's shape (random weights), one\n"
      "rank on this process's threads: with the key/value cache (one prefill, then one\n"
      "position per token) and recomputing (every token runs the model over the whole\n"
      "window, as `weft generate --no-cache`), alternating the two in each round. Prints\n"
      "the median seconds and tokens/s of each (new tokens over the whole call, prefill\n"
      "included), the ratio, and whether both produced the same ids.");
  opts.option("preset", "NAME", "tiny", "model shape: tiny, gpt2-124m, llama-tiny, moe-tiny, ...")
      .option("seq", "T", "preset", "context length (positions the model holds)")
      .option("prompt-tokens", "N", "none", "prompt length (required, at most --seq)")
      .option("tokens", "M", "none", "new tokens to generate (required)")
      .option("dtype", "f32|bf16", "f32", "compute type")
      .option("rounds", "N", "3", "timing rounds, each running both paths (medians reported)")
      .flag("json", "print {\"cached_tokens_per_s\", \"uncached_tokens_per_s\", \"same_tokens\"}");
  return opts;
}

int run(const std::vector<std::string>& args) {
  cli::Options opts = run_options();
  opts.parse(args);
  const bool json = opts.flag_set("json");
  nn::GptConfig cfg = nn::gpt_preset(opts.str("preset"));
  if (opts.given("seq")) cfg.seq = opts.integer("seq");
  WEFT_CHECK(cfg.seq >= 1, "--seq must be positive, got {}", cfg.seq);
  WEFT_CHECK(opts.given("prompt-tokens") && opts.given("tokens"),
             "give the prompt and generation lengths: --prompt-tokens N --tokens M");
  const int64_t prompt_tokens = opts.integer("prompt-tokens"), tokens = opts.integer("tokens");
  WEFT_CHECK(prompt_tokens >= 1 && prompt_tokens <= cfg.seq,
             "--prompt-tokens {} must lie in [1, --seq {}]", prompt_tokens, cfg.seq);
  WEFT_CHECK(tokens >= 1, "--tokens must be at least 1, got {}", tokens);
  const int64_t rounds = opts.integer("rounds");
  WEFT_CHECK(rounds >= 1, "--rounds must be at least 1, got {}", rounds);
  const DType dtype = parse_dtype(opts.choice("dtype", {"f32", "bf16"}));

  nn::Gpt model(parallel::make_context(nullptr, parallel::SequenceParallel::off,
                                       parallel::Precision::of(dtype), 1),
                cfg);
  std::mt19937 gen(7);
  std::vector<int32_t> prompt(static_cast<size_t>(prompt_tokens));
  for (int32_t& id : prompt) id = static_cast<int32_t>(gen() % static_cast<uint32_t>(cfg.vocab));
  infer::GenerateOptions cached{.tokens = tokens, .temperature = 0.0f};
  infer::GenerateOptions recomputing = cached;
  recomputing.cache = false;

  bench::info_stream(json) << "weft bench generate: " << opts.str("preset") << ", context "
                           << cfg.seq << ", prompt " << prompt_tokens << " tokens, " << tokens
                           << " new tokens, " << dtype_name(dtype) << ", " << num_threads()
                           << " threads; cpu: " << kernels::describe_cpu_support() << "\n";
  // A first call of each (caches oneDNN's primitives for these shapes), and
  // the ids every round must reproduce.
  const std::vector<int32_t> want = infer::generate(model, prompt, cached);
  bool same = want == infer::generate(model, prompt, recomputing);
  auto timed = [&](const infer::GenerateOptions& o) {
    return [&, o] {
      std::vector<int32_t> ids;
      const double s = bench::seconds([&] { ids = infer::generate(model, prompt, o); });
      same = same && ids == want;
      return s;
    };
  };
  const auto samples =
      bench::alternate(rounds, {timed(cached), timed(recomputing)}, bench::Order::rotating);
  const double t_cached = bench::median(samples[0]), t_recomputing = bench::median(samples[1]);
  const double n = static_cast<double>(want.size());
  if (json) {
    io::Json row = io::Json::object();
    row["cached_tokens_per_s"] = n / t_cached;
    row["uncached_tokens_per_s"] = n / t_recomputing;
    row["same_tokens"] = same;
    bench::print_json(row);
    return 0;
  }
  std::printf("%-12s %10s %12s\n", "path", "seconds", "tokens/s");
  std::printf("%-12s %10.4f %12.1f\n", "cached", t_cached, n / t_cached);
  std::printf("%-12s %10.4f %12.1f\n", "recomputing", t_recomputing, n / t_recomputing);
  std::printf("cached is %.1fx the recomputing path's tokens/s; same tokens: %s\n",
              t_recomputing / t_cached, same ? "yes" : "NO");
  return 0;
}

cli::Register reg("bench generate",
                  "time generation with the key/value cache against recomputing the window",
                  run_options, run);

}  // namespace
}  // namespace weft
