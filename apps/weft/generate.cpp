// `weft generate`: sample text from a checkpoint.
#include "weft/infer/generate.h"

#include <fstream>
#include <iostream>
#include <optional>
#include <span>

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
      "Continues prompts with text sampled from a checkpoint (temperature, top-k and top-p;\n"
      "the same seed gives the same text). A checkpoint that carries a tokenizer (weft\n"
      "train --tokenizer, or imported from a Hugging Face directory with its\n"
      "tokenizer.json) and byte-level models (vocabulary 256) take --prompt TEXT and print\n"
      "text: the prompt is encoded as transformers encodes it (the BOS the tokenizer adds\n"
      "included), and prompt and continuation are decoded with special tokens left out.\n"
      "Other models take --prompt-ids and print ids. Several prompts (--prompt repeated,\n"
      "--prompts FILE) run as one batch; prompt i samples with seed + i, so it continues\n"
      "as it would alone, and each result is printed in order (--json: one object a\n"
      "line). Generation keeps a key/value cache: the prompts run once, then each new\n"
      "token one position; --no-cache recomputes the whole window for every token instead\n"
      "(the same tokens, slower; on a GPU generation always recomputes). A sequence stops\n"
      "at --tokens or after the end-of-sequence id: --eos, else the tokenizer's (its\n"
      "post-processor's EOS, else <|endoftext|>, </s>, <|end_of_text|> or <eos>).");
  opts.option("checkpoint", "DIR|FILE", "none",
              "a checkpoint directory (weft train --save) or a GPT-2 .safetensors file (required)")
      .repeated("prompt", "TEXT",
                "a text to continue (models with a tokenizer, byte-level models; default: a "
                "newline, or nothing but the tokenizer's BOS)")
      .option("prompts", "FILE", "none", "texts to continue, one a line")
      .repeated("prompt-ids", "IDS", "a prompt as comma-separated token ids")
      .option("tokens", "N", "200", "tokens to generate per prompt")
      .option("temperature", "T", "0.8", "sampling temperature (0: always the most likely token)")
      .option("top-k", "K", "40", "sample among the K most likely tokens (0: all)")
      .option("top-p", "P", "1",
              "then among the fewest of them whose probability reaches P (1: all of them)")
      .option("eos", "ID", "the tokenizer's", "stop a sequence after this end-of-sequence token id")
      .option("seed", "S", "1337", "sampling seed")
      .option("dtype", "f32|bf16", "f32", "compute type")
      .option("device", "cpu|cuda|cuda:N", "cpu", "where the model runs (a GPU needs a CUDA build)")
      .flag("no-cache", "recompute the whole window for every new token (no key/value cache)")
      .flag("json", "print {\"prompt_ids\":[...],\"ids\":[...],\"text\":...} for each prompt");
  return opts;
}

// The one place where prompt text becomes token ids and generated ids become
// text, for the model being sampled: the checkpoint's own tokenizer where it
// carries one (the prompt encoded as transformers encodes it, BOS included);
// else its vocabulary's bytes for a byte-level model; a model without a text
// form takes --prompt-ids and has no text (nullopt).
struct TextForm {
  std::optional<text::Tokenizer> tokenizer;
  bool bytes = false;
};

TextForm text_form(const train::InferenceModel& m, const std::string& checkpoint) {
  TextForm f;
  if (const std::string json = io::model_tokenizer(checkpoint); !json.empty()) {
    f.tokenizer.emplace(text::Tokenizer::from_json(json, checkpoint + "/tokenizer.json"));
  }
  f.bytes = !f.tokenizer && m.model->config().vocab == io::ByteTokenizer::kVocabSize;
  return f;
}

std::vector<int32_t> encode_prompt(const train::InferenceModel& m, const TextForm& f,
                                   const std::string& text) {
  if (f.tokenizer) return train::encode_prompt(*f.tokenizer, text);
  WEFT_CHECK(f.bytes,
             "this model's vocabulary has {} tokens (not bytes) and its checkpoint carries no "
             "tokenizer: pass the prompt as token ids, e.g. --prompt-ids 464,2068 (GPT-2: 50256 "
             "is <|endoftext|>), or train with --tokenizer FILE|DIR",
             m.model->config().vocab);
  return io::ByteTokenizer().encode(text);
}

// The prompt and its continuation as one text (a tokenizer decodes them
// together: a word may span the boundary), or nullopt without a text form.
std::optional<std::string> decode_ids(const TextForm& f, std::span<const int32_t> prompt,
                                      std::span<const int32_t> ids) {
  std::vector<int32_t> all(prompt.begin(), prompt.end());
  all.insert(all.end(), ids.begin(), ids.end());
  if (f.tokenizer) return train::decode_generated(*f.tokenizer, all);
  if (f.bytes) return io::ByteTokenizer().decode(all);
  return std::nullopt;
}

// The end-of-sequence id a tokenizer names: its post-processor's EOS (the
// last token it appends), else the usual names; -1 when none.
int32_t tokenizer_eos(const text::Tokenizer& tok) {
  if (!tok.suffix_ids().empty()) return tok.suffix_ids().back();
  for (const char* name : {"<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>"}) {
    if (auto id = tok.token_to_id(name)) return *id;
  }
  return -1;
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
  const TextForm form = text_form(m, opts.str("checkpoint"));
  if (!opts.given("eos") && form.tokenizer) eos = tokenizer_eos(*form.tokenizer);
  WEFT_CHECK(eos < vocab, "--eos {} is outside the model's vocabulary of {}", eos, vocab);
  std::vector<std::vector<int32_t>> prompts;
  if (opts.given("prompt-ids")) {
    for (const std::string& ids : opts.all("prompt-ids")) {
      prompts.push_back(cli::parse_token_ids(ids));
    }
  } else {
    std::vector<std::string> given = opts.given("prompts") ? lines : opts.all("prompt");
    const bool start_of_text = given.empty() && form.tokenizer;
    if (given.empty()) given.push_back(form.tokenizer ? "" : "\n");
    for (const std::string& text : given) prompts.push_back(encode_prompt(m, form, text));
    // No prompt and a tokenizer that adds no BOS (GPT-2's): start from its
    // end-of-text token, as llm.c's sampling does.
    if (start_of_text && prompts.front().empty() && eos >= 0) prompts.front() = {eos};
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
    const std::optional<std::string> text = decode_ids(form, prompts[i], ids[i]);
    if (opts.flag_set("json")) {
      io::Json out = io::Json::object();
      io::Json p = io::Json::array(), g = io::Json::array();
      for (int32_t id : prompts[i]) p.push_back(id);
      for (int32_t id : ids[i]) g.push_back(id);
      out["prompt_ids"] = std::move(p);
      out["ids"] = std::move(g);
      if (text) out["text"] = infer::valid_utf8(*text);
      std::cout << out.dump() << std::endl;
    } else if (text) {
      std::cout << *text << std::endl;
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
