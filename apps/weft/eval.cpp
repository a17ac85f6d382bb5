// `weft eval`: the loss of a checkpoint on a data file.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>

#include "cli.h"
#include "weft/comm/local.h"
#include "weft/io/checkpoint_tokenizer.h"
#include "weft/io/data.h"
#include "weft/io/data_prepare.h"
#include "weft/io/json.h"
#include "weft/text/tokenizer.h"
#include "weft/train/evaluate.h"
#include "weft/train/load_model.h"

namespace weft {
namespace {

cli::Options eval_command_options() {
  cli::Options opts("weft eval [options]",
                    "Evaluates a checkpoint: the mean next-token loss (nats), the number of\n"
                    "tokens scored and the perplexity, every token of the data predicted once\n"
                    "from up to a context of preceding tokens. Runs on one process, all cores.");
  opts.option("checkpoint", "DIR|FILE", "none",
              "a checkpoint directory (weft train --save) or a GPT-2 .safetensors file (required)")
      .option("data", "FILE", "fortunes",
              "text file or llm.c .bin token shard; default: the fortunes corpus. Text goes "
              "through the checkpoint's tokenizer when it carries one (as transformers "
              "encodes it, BOS included), else one token per byte")
      .option("split", "all|val", "auto",
              "all tokens of the data, or its validation split as weft train holds it out "
              "(auto: val for the default corpus, all for --data)")
      .option("val-fraction", "F", "0.1", "the validation share, as in weft train")
      .option("batch", "N", "8", "windows per forward pass")
      .option("max-tokens", "N", "0", "score at most N tokens (0: all)")
      .option("dtype", "f32|bf16", "f32", "compute type")
      .option("device", "cpu|cuda|cuda:N", "cpu", "where the model runs (a GPU needs a CUDA build)")
      .option("cp", "N", "1",
              "context parallelism: each window split over N rank threads (the checkpoint's "
              "context divisible by 2N; cpu)")
      .option("cp-comm", "p2p|allgather|a2a", "p2p", "the attention exchange under --cp")
      .flag("allow-nonfinite",
            "load a checkpoint that holds NaN or infinite values, for inspection (by default "
            "that is an error naming the tensor and the file)")
      .flag("json",
            "print {\"loss\":...,\"tokens\":...,\"perplexity\":...,\"finite\":true}; a loss "
            "that is not finite is written as null with \"finite\": false");
  return opts;
}

io::TokenData eval_data(const cli::Options& opts);
train::EvalResult evaluate(const cli::Options& opts, nn::Gpt& model, io::TokenData data,
                           bool report);
void print(const cli::Options& opts, const train::EvalResult& r);

int eval_command(const std::vector<std::string>& args) {
  cli::Options opts = eval_command_options();
  opts.parse(args);
  WEFT_CHECK(opts.given("checkpoint"),
             "give the model to evaluate: weft eval --checkpoint DIR|FILE.safetensors");
  opts.choice("split", {"auto", "all", "val"});  // checked before any loading
  const int64_t batch = opts.integer("batch"), max_tokens = opts.integer("max-tokens");
  WEFT_CHECK(batch >= 1, "--batch must be at least 1, got {}", batch);
  WEFT_CHECK(max_tokens >= 0, "--max-tokens must not be negative, got {}", max_tokens);
  const DType dtype = parse_dtype(opts.choice("dtype", {"f32", "bf16"}));
  const int64_t cp = opts.integer("cp");
  WEFT_CHECK(cp >= 1 && cp <= 64, "--cp must lie in [1, 64], got {}", cp);
  WEFT_CHECK(cp == 1 || Device::parse(opts.str("device")).is_cpu(),
             "--cp {} runs on the CPU: pass --device cpu", cp);
  const std::string cp_comm = opts.choice("cp-comm", {"p2p", "allgather", "a2a"});
  const io::ReadOptions read{.allow_nonfinite = opts.flag_set("allow-nonfinite")};
  train::EvalResult r;
  if (cp == 1) {
    train::InferenceModel m = train::load_for_inference(opts.str("checkpoint"), dtype, read,
                                                        Device::parse(opts.str("device")));
    r = evaluate(opts, *m.model, eval_data(opts), true);
  } else {
    // Rank threads of one context-parallel group: rank 0 reports.
    const io::TokenData data = eval_data(opts);
    comm::run_local(static_cast<int>(cp), [&](comm::ProcessGroup& world) {
      train::InferenceModel m =
          train::load_for_inference(opts.str("checkpoint"), world, dtype, read, cp_comm);
      const train::EvalResult mine = evaluate(opts, *m.model, data, world.rank() == 0);
      if (world.rank() == 0) r = mine;
    });
  }
  print(opts, r);
  return 0;
}

// The tokens the options name: --data (text through the checkpoint's
// tokenizer when it carries one) or the fortunes corpus.
io::TokenData eval_data(const cli::Options& opts) {
  const std::string tok_json = io::model_tokenizer(opts.str("checkpoint"));
  if (!tok_json.empty() &&
      (!opts.given("data") || io::data_format(opts.str("data")) == io::TokenData::Format::text)) {
    const text::Tokenizer tok =
        text::Tokenizer::from_json(tok_json, opts.str("checkpoint") + "/tokenizer.json");
    return opts.given("data")
               ? io::tokenize_text_files(tok, opts.str("data"))
               : io::tokenize_text(tok, io::default_corpus_text(), "the fortunes corpus");
  }
  return opts.given("data") ? io::load_token_files(opts.str("data")) : io::default_corpus();
}

// Evaluates `model` on `data`; progress on stderr when `report`.
train::EvalResult evaluate(const cli::Options& opts, nn::Gpt& model, io::TokenData data,
                           bool report) {
  const int64_t batch = opts.integer("batch"), max_tokens = opts.integer("max-tokens");
  const std::string split = opts.choice("split", {"auto", "all", "val"});
  const nn::GptConfig& cfg = model.config();
  const bool val = split == "val" || (split == "auto" && !opts.given("data"));
  std::span<const int32_t> tokens(data.tokens);
  std::optional<io::Dataset> held_out;
  if (val) {
    held_out.emplace(std::move(data), cfg.seq, opts.number("val-fraction"));
    tokens = held_out->val();
  }
  if (max_tokens > 0 && static_cast<int64_t>(tokens.size()) > max_tokens + 1) {
    tokens = tokens.first(static_cast<size_t>(max_tokens + 1));
  }
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  auto progress = [&](int64_t done, int64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::seconds(5) || done == total) return;
    last = now;
    const double t = std::chrono::duration<double>(now - start).count();
    std::fprintf(stderr, "eval: %lld/%lld tokens, %.0f tokens/s\n", static_cast<long long>(done),
                 static_cast<long long>(total), static_cast<double>(done) / t);
  };
  return train::evaluate_tokens(model, tokens, batch,
                                report ? std::function<void(int64_t, int64_t)>(progress) : nullptr);
}

void print(const cli::Options& opts, const train::EvalResult& r) {
  if (opts.flag_set("json")) {
    // JSON has no NaN or Infinity: such a loss is null, and "finite" says why.
    const bool finite = std::isfinite(r.loss);
    io::Json out = io::Json::object();
    out["loss"] = finite ? io::Json(r.loss) : io::Json();
    out["tokens"] = r.tokens;
    out["perplexity"] = std::isfinite(r.perplexity()) ? io::Json(r.perplexity()) : io::Json();
    out["finite"] = finite;
    std::cout << out.dump() << std::endl;
  } else {
    std::printf("loss %.4f  perplexity %.3f  tokens %lld\n", r.loss, r.perplexity(),
                static_cast<long long>(r.tokens));
  }
}

const cli::Register reg("eval", "loss and perplexity of a checkpoint on a data file",
                        eval_command_options, eval_command);

}  // namespace
}  // namespace weft
