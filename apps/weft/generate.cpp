// `weft generate`: sample text from a checkpoint.
#include "weft/train/generate.h"

#include <iostream>

#include "cli.h"
#include "weft/io/checkpoint_tokenizer.h"
#include "weft/io/json.h"
#include "weft/io/tokenizer.h"
#include "weft/text/tokenizer.h"
#include "weft/train/load_model.h"
#include "weft/train/run_tokenizer.h"

namespace weft {
namespace {

cli::Options generate_command_options() {
  cli::Options opts(
      "weft generate [options]",
      "Continues a prompt with text sampled from a checkpoint (temperature and top-k;\n"
      "the same seed gives the same text). A checkpoint that carries a tokenizer\n"
      "(weft train --tokenizer, or imported from a Hugging Face directory with its\n"
      "tokenizer.json) and byte-level models (vocabulary 256) take --prompt TEXT and\n"
      "print text: the prompt is encoded as transformers encodes it (the BOS the\n"
      "tokenizer adds included) and the prompt and continuation are decoded with\n"
      "special tokens left out. Other models take --prompt-ids and print ids.");
  opts.option("checkpoint", "DIR|FILE", "none",
              "a checkpoint directory (weft train --save) or a GPT-2 .safetensors file (required)")
      .option("prompt", "TEXT", "a newline",
              "the text to continue (models with a tokenizer, byte-level models)")
      .option("prompt-ids", "IDS", "none", "the prompt as comma-separated token ids")
      .option("tokens", "N", "200", "tokens to generate")
      .option("temperature", "T", "0.8", "sampling temperature (0: always the most likely token)")
      .option("top-k", "K", "40", "sample among the K most likely tokens (0: all)")
      .option("seed", "S", "1337", "sampling seed")
      .option("dtype", "f32|bf16", "f32", "compute type")
      .option("device", "cpu|cuda|cuda:N", "cpu", "where the model runs (a GPU needs a CUDA build)")
      .flag("json", "print {\"prompt_ids\":[...],\"ids\":[...],\"text\":...}");
  return opts;
}

std::vector<int32_t> joined(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

int generate_command(const std::vector<std::string>& args) {
  cli::Options opts = generate_command_options();
  opts.parse(args);
  WEFT_CHECK(opts.given("checkpoint"),
             "give the model to sample from: weft generate --checkpoint DIR|FILE.safetensors");
  WEFT_CHECK(!(opts.given("prompt") && opts.given("prompt-ids")),
             "give the prompt as --prompt TEXT or as --prompt-ids IDS, not both");
  const int64_t tokens = opts.integer("tokens"), top_k = opts.integer("top-k");
  const double temperature = opts.number("temperature");
  WEFT_CHECK(tokens >= 0, "--tokens must not be negative, got {}", tokens);
  WEFT_CHECK(top_k >= 0, "--top-k must not be negative, got {}", top_k);
  WEFT_CHECK(temperature >= 0, "--temperature must not be negative, got {}", temperature);
  const int64_t seed = opts.integer("seed");
  WEFT_CHECK(seed >= 0, "--seed must not be negative, got {}", seed);
  const DType dtype = parse_dtype(opts.choice("dtype", {"f32", "bf16"}));

  train::InferenceModel m = train::load_for_inference(opts.str("checkpoint"), dtype, {},
                                                      Device::parse(opts.str("device")));
  const int64_t vocab = m.model->config().vocab;
  // The checkpoint's own tokenizer, when it carries one.
  std::optional<text::Tokenizer> hf;
  if (const std::string json = io::model_tokenizer(opts.str("checkpoint")); !json.empty())
    hf.emplace(text::Tokenizer::from_json(json, opts.str("checkpoint") + "/tokenizer.json"));
  const bool bytes = !hf && vocab == io::ByteTokenizer::kVocabSize;
  io::ByteTokenizer tok;
  std::vector<int32_t> prompt;
  if (opts.given("prompt-ids")) {
    prompt = cli::parse_token_ids(opts.str("prompt-ids"));
  } else if (hf) {
    prompt = train::encode_prompt(*hf, opts.given("prompt") ? opts.str("prompt") : "");
  } else {
    WEFT_CHECK(bytes,
               "this model's vocabulary has {} tokens (not bytes) and its checkpoint carries no "
               "tokenizer: pass the prompt as token ids, e.g. --prompt-ids 464,2068 (GPT-2: 50256 "
               "is <|endoftext|>), or train with --tokenizer FILE|DIR",
               vocab);
    prompt = tok.encode(opts.given("prompt") ? opts.str("prompt") : "\n");
  }
  WEFT_CHECK(static_cast<int64_t>(prompt.size()) <= m.model->config().seq,
             "the prompt is {} tokens, longer than the model's context of {}: shorten --prompt",
             prompt.size(), m.model->config().seq);
  const std::vector<int32_t> ids = train::generate(*m.model, prompt,
                                                   {.tokens = tokens,
                                                    .temperature = static_cast<float>(temperature),
                                                    .top_k = top_k,
                                                    .seed = static_cast<uint64_t>(seed)});
  if (opts.flag_set("json")) {
    io::Json out = io::Json::object();
    io::Json p = io::Json::array(), g = io::Json::array();
    for (int32_t id : prompt) p.push_back(id);
    for (int32_t id : ids) g.push_back(id);
    out["prompt_ids"] = std::move(p);
    out["ids"] = std::move(g);
    if (hf) out["text"] = train::decode_generated(*hf, joined(prompt, ids));
    if (bytes) out["text"] = train::valid_utf8(tok.decode(prompt) + tok.decode(ids));
    std::cout << out.dump() << std::endl;
  } else if (hf) {
    std::cout << train::decode_generated(*hf, joined(prompt, ids)) << std::endl;
  } else if (bytes) {
    std::cout << tok.decode(prompt) << tok.decode(ids) << std::endl;
  } else {
    for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? "," : "") << ids[i];
    std::cout << std::endl;
  }
  return 0;
}

const cli::Register reg("generate", "sample text from a checkpoint", generate_command_options,
                        generate_command);

}  // namespace
}  // namespace weft
