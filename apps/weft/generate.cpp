// `weft generate`: sample text from a checkpoint.
#include "weft/infer/generate.h"

#include <fstream>
#include <iostream>
#include <optional>
#include <span>

#include "cli.h"
#include "weft/io/json.h"
#include "weft/io/tokenizer.h"
#include "weft/train/load_model.h"

namespace weft {
namespace {

cli::Options generate_command_options() {
  cli::Options opts(
      "weft generate [options]",
      "Continues prompts with text sampled from a checkpoint (temperature, top-k and top-p;\n"
      "the same seed gives the same text). Byte-level models (vocabulary 256) take\n"
      "--prompt TEXT and print text. Models with another vocabulary (GPT-2's 50257\n"
      "BPE tokens) need a tokenizer weft does not have: pass --prompt-ids and read\n"
      "token ids back. Several prompts (--prompt repeated, --prompts FILE) run as one\n"
      "batch; prompt i samples with seed + i, so it continues as it would alone, and\n"
      "each result is printed in order (--json: one object a line). Generation keeps\n"
      "a key/value cache: the prompts run once, then each new token one position;\n"
      "--no-cache recomputes the whole window for every token instead (the same\n"
      "tokens, slower; on a GPU generation always recomputes). A sequence stops at\n"
      "--tokens or after the end-of-sequence id --eos.");
  opts.option("checkpoint", "DIR|FILE", "none",
              "a checkpoint directory (weft train --save) or a GPT-2 .safetensors file (required)")
      .repeated("prompt", "TEXT", "a text to continue (byte-level models; default: a newline)")
      .option("prompts", "FILE", "none", "texts to continue, one a line (byte-level models)")
      .repeated("prompt-ids", "IDS", "a prompt as comma-separated token ids")
      .option("tokens", "N", "200", "tokens to generate per prompt")
      .option("temperature", "T", "0.8", "sampling temperature (0: always the most likely token)")
      .option("top-k", "K", "40", "sample among the K most likely tokens (0: all)")
      .option("top-p", "P", "1",
              "then among the fewest of them whose probability reaches P (1: all of them)")
      .option("eos", "ID", "none", "stop a sequence after this end-of-sequence token id")
      .option("seed", "S", "1337", "sampling seed")
      .option("dtype", "f32|bf16", "f32", "compute type")
      .option("device", "cpu|cuda|cuda:N", "cpu", "where the model runs (a GPU needs a CUDA build)")
      .flag("no-cache", "recompute the whole window for every new token (no key/value cache)")
      .flag("json", "print {\"prompt_ids\":[...],\"ids\":[...],\"text\":...} for each prompt");
  return opts;
}

// The one place where prompt text becomes token ids and generated ids become
// text, for the model being sampled: its vocabulary's bytes for a
// byte-level model; a model without a text form takes --prompt-ids and has
// no text (nullopt). A checkpoint's own tokenizer plugs in here.
std::vector<int32_t> encode_prompt(const train::InferenceModel& m, const std::string& text) {
  const int64_t vocab = m.model->config().vocab;
  WEFT_CHECK(vocab == io::ByteTokenizer::kVocabSize,
             "this model's vocabulary has {} tokens (not bytes) and weft has no BPE tokenizer: "
             "pass the prompt as token ids, e.g. --prompt-ids 464,2068 (GPT-2: 50256 is "
             "<|endoftext|>)",
             vocab);
  return io::ByteTokenizer().encode(text);
}
std::optional<std::string> decode_ids(const train::InferenceModel& m,
                                      std::span<const int32_t> ids) {
  if (m.model->config().vocab != io::ByteTokenizer::kVocabSize) return std::nullopt;
  return io::ByteTokenizer().decode(std::vector<int32_t>(ids.begin(), ids.end()));
}

// The texts of --prompts FILE, one a line (a final newline ends the last).
std::vector<std::string> prompt_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  WEFT_CHECK(in.good(), "--prompts {}: cannot open the file", path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  WEFT_CHECK(!lines.empty(), "--prompts {}: the file holds no line to continue", path);
  return lines;
}

int generate_command(const std::vector<std::string>& args) {
  cli::Options opts = generate_command_options();
  opts.parse(args);
  WEFT_CHECK(opts.given("checkpoint"),
             "give the model to sample from: weft generate --checkpoint DIR|FILE.safetensors");
  const int texts = (opts.given("prompt") ? 1 : 0) + (opts.given("prompts") ? 1 : 0);
  WEFT_CHECK(texts + (opts.given("prompt-ids") ? 1 : 0) <= 1,
             "give the prompts one way: --prompt TEXT, --prompts FILE or --prompt-ids IDS");
  const int64_t tokens = opts.integer("tokens"), top_k = opts.integer("top-k");
  const double temperature = opts.number("temperature"), top_p = opts.number("top-p");
  WEFT_CHECK(tokens >= 0, "--tokens must not be negative, got {}", tokens);
  WEFT_CHECK(top_k >= 0, "--top-k must not be negative, got {}", top_k);
  WEFT_CHECK(temperature >= 0, "--temperature must not be negative, got {}", temperature);
  WEFT_CHECK(top_p > 0 && top_p <= 1, "--top-p must lie in (0, 1], got {}", top_p);
  const int64_t seed = opts.integer("seed");
  WEFT_CHECK(seed >= 0, "--seed must not be negative, got {}", seed);
  int32_t eos = -1;
  if (opts.given("eos")) {
    const int64_t e = opts.integer("eos");
    WEFT_CHECK(e >= 0 && e <= INT32_MAX, "--eos must be a token id, got {}", e);
    eos = static_cast<int32_t>(e);
  }
  const DType dtype = parse_dtype(opts.choice("dtype", {"f32", "bf16"}));
  const std::vector<std::string> lines =
      opts.given("prompts") ? prompt_lines(opts.str("prompts")) : std::vector<std::string>{};

  train::InferenceModel m = train::load_for_inference(opts.str("checkpoint"), dtype, {},
                                                      Device::parse(opts.str("device")));
  const int64_t vocab = m.model->config().vocab;
  WEFT_CHECK(eos < vocab, "--eos {} is outside the model's vocabulary of {}", eos, vocab);
  std::vector<std::vector<int32_t>> prompts;
  if (opts.given("prompt-ids")) {
    for (const std::string& ids : opts.all("prompt-ids")) {
      prompts.push_back(cli::parse_token_ids(ids));
    }
  } else {
    std::vector<std::string> given = opts.given("prompts") ? lines : opts.all("prompt");
    if (given.empty()) given.push_back("\n");
    for (const std::string& text : given) prompts.push_back(encode_prompt(m, text));
  }
  const std::vector<std::vector<int32_t>> ids =
      infer::generate(*m.model, prompts,
                      {.tokens = tokens,
                       .temperature = static_cast<float>(temperature),
                       .top_k = top_k,
                       .top_p = static_cast<float>(top_p),
                       .seed = static_cast<uint64_t>(seed),
                       .eos = eos,
                       .cache = !opts.flag_set("no-cache")});
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::optional<std::string> prompt_text = decode_ids(m, prompts[i]);
    const std::optional<std::string> text = decode_ids(m, ids[i]);
    if (opts.flag_set("json")) {
      io::Json out = io::Json::object();
      io::Json p = io::Json::array(), g = io::Json::array();
      for (int32_t id : prompts[i]) p.push_back(id);
      for (int32_t id : ids[i]) g.push_back(id);
      out["prompt_ids"] = std::move(p);
      out["ids"] = std::move(g);
      if (text) out["text"] = infer::valid_utf8(*prompt_text + *text);
      std::cout << out.dump() << std::endl;
    } else if (text) {
      std::cout << *prompt_text << *text << std::endl;
    } else {
      for (size_t k = 0; k < ids[i].size(); ++k) std::cout << (k ? "," : "") << ids[i][k];
      std::cout << std::endl;
    }
  }
  return 0;
}

const cli::Register reg("generate", "sample text from a checkpoint", generate_command_options,
                        generate_command);

}  // namespace
}  // namespace weft
