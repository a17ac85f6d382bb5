// weft's tokenizer.json reader against Hugging Face's `tokenizers` library:
// the ids and decodings it gave for the fixtures of tests/text/data
// (make_fixtures.py) must come out exactly.
#include "weft/text/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "weft/core/error.h"

namespace {

using weft::text::EncodeCache;
using weft::text::Tokenizer;

std::string read(const std::string& name) {
  std::ifstream in(std::string(WEFT_TEXT_DATA) + "/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const nlohmann::json& expected() {
  static const nlohmann::json j = nlohmann::json::parse(read("expected.json"));
  return j;
}

std::vector<int32_t> ids_of(const nlohmann::json& j) { return j.get<std::vector<int32_t>>(); }

void check_exact(const std::string& name) {
  const Tokenizer tok = Tokenizer::from_file(std::string(WEFT_TEXT_DATA) + "/" + name + ".json");
  EncodeCache cache;
  for (const auto& [text_name, want] : expected().at(name).items()) {
    SCOPED_TRACE(name + " on " + text_name);
    const std::string text = read(text_name);
    const auto ids = tok.encode(text);
    EXPECT_EQ(ids, ids_of(want.at("ids")));
    // Through a cache, twice (the second time from the cache).
    EXPECT_EQ(tok.encode(text, true, &cache), ids);
    EXPECT_EQ(tok.encode(text, true, &cache), ids);
    EXPECT_EQ(tok.decode(ids), want.at("decoded").get<std::string>());
    EXPECT_EQ(tok.decode(ids, true), want.at("decoded_skip").get<std::string>());
  }
}

TEST(HfTokenizer, Gpt2ByteLevelExact) { check_exact("gpt2"); }
TEST(HfTokenizer, Llama3SplitByteLevelExact) { check_exact("llama3"); }
TEST(HfTokenizer, Llama2MetaspaceByteFallbackExact) { check_exact("llama2"); }

// Byte-level tokenizers give every text back exactly.
TEST(HfTokenizer, ByteLevelRoundTrip) {
  for (const char* name : {"gpt2", "llama3"}) {
    const Tokenizer tok = Tokenizer::from_file(std::string(WEFT_TEXT_DATA) + "/" + name + ".json");
    for (const char* text_name : {"license.txt", "python_source.txt", "unicode_stress.txt"}) {
      SCOPED_TRACE(std::string(name) + " on " + text_name);
      const std::string text = read(text_name);
      // The GPT-2 fixture adds no BOS: every token is the text's; Llama 3's BOS
      // is special and skipped.
      EXPECT_EQ(tok.decode(tok.encode(text), std::string(name) == "llama3"), text);
    }
  }
}

// Every component variant of variants.json: the base tokenizer with fields
// replaced, on the stress text (or the variant's own text).
TEST(HfTokenizer, ComponentVariantsExact) {
  const auto variants = nlohmann::json::parse(read("variants.json"));
  ASSERT_GT(variants.size(), 30u);
  for (const auto& v : variants) {
    const std::string name = v.at("name");
    SCOPED_TRACE(name);
    auto spec = nlohmann::json::parse(read(v.at("base").get<std::string>() + ".json"));
    for (const auto& [key, value] : v.at("fields").items()) spec[key] = value;
    const Tokenizer tok = Tokenizer::from_json(spec.dump(), name);
    const std::string t = v.at("text");
    const std::string text = t.ends_with(".txt") ? read(t) : t;
    const auto ids = tok.encode(text);
    EXPECT_EQ(ids, ids_of(v.at("ids")));
    EXPECT_EQ(tok.decode(ids), v.at("decoded").get<std::string>());
    EXPECT_EQ(tok.decode(ids, true), v.at("decoded_skip").get<std::string>());
  }
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const weft::Error& e) {
    return e.what();
  }
  return "";
}

nlohmann::json gpt2_spec() { return nlohmann::json::parse(read("gpt2.json")); }

TEST(HfTokenizer, UnsupportedComponentsAreRefusedByName) {
  struct Case {
    const char* field;
    nlohmann::json value;
    const char* name;
  };
  const std::vector<Case> cases = {
      {"normalizer", {{"type", "BertNormalizer"}}, "BertNormalizer"},
      {"normalizer", {{"type", "Precompiled"}, {"precompiled_charsmap", ""}}, "Precompiled"},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}, "BertPreTokenizer"},
      {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}}, "WordPiece"},
      {"post_processor", {{"type", "RobertaProcessing"}}, "RobertaProcessing"},
      {"truncation", {{"max_length", 8}}, "truncation"},
  };
  for (const auto& c : cases) {
    auto spec = gpt2_spec();
    spec[c.field] = c.value;
    const std::string msg = error_of([&] { Tokenizer::from_json(spec.dump()); });
    EXPECT_NE(msg.find(c.name), std::string::npos) << c.name << ": " << msg;
  }
  auto spec = gpt2_spec();
  spec["model"]["continuing_subword_prefix"] = "##";
  EXPECT_NE(error_of([&] { Tokenizer::from_json(spec.dump()); }).find("continuing_subword_prefix"),
            std::string::npos);
  spec = gpt2_spec();
  spec["model"]["end_of_word_suffix"] = "</w>";
  EXPECT_NE(error_of([&] { Tokenizer::from_json(spec.dump()); }).find("end_of_word_suffix"),
            std::string::npos);
  spec = gpt2_spec();
  spec["model"]["type"] = "Unigram";
  EXPECT_NE(error_of([&] { Tokenizer::from_json(spec.dump()); }).find("Unigram"),
            std::string::npos);
  spec = gpt2_spec();
  spec["model"]["dropout"] = 0.1;
  EXPECT_NE(error_of([&] { Tokenizer::from_json(spec.dump()); }).find("dropout"),
            std::string::npos);
}

TEST(HfTokenizer, MalformedInputsSayWhat) {
  EXPECT_NE(error_of([] { Tokenizer::from_json("{\"model\": ", "t.json"); }).find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              Tokenizer::from_json("[1, 2]", "t.json");
            }).find("not a Hugging Face tokenizer.json"),
            std::string::npos);
  auto spec = gpt2_spec();
  spec["model"]["merges"].push_back(nlohmann::json::array({"Ġ", "nosuchtoken"}));
  EXPECT_NE(error_of([&] { Tokenizer::from_json(spec.dump()); }).find("nosuchtoken"),
            std::string::npos);
  spec = gpt2_spec();
  spec["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  EXPECT_NE(error_of([&] { Tokenizer::from_json(spec.dump()); }).find("(unclosed"),
            std::string::npos);

  const Tokenizer tok = Tokenizer::from_json(read("gpt2.json"));
  EXPECT_NE(error_of([&] { tok.encode(std::string("ab\xC3(cd")); }).find("byte offset 2"),
            std::string::npos);
  const std::vector<int32_t> bad = {10, tok.vocab_size()};
  EXPECT_NE(error_of([&] {
              tok.decode(bad);
            }).find(fmt::format("token id {} (at position 1)", tok.vocab_size())),
            std::string::npos);
}

TEST(HfTokenizer, VocabularyAndSpecialTokens) {
  const Tokenizer gpt2 = Tokenizer::from_json(read("gpt2.json"));
  EXPECT_EQ(gpt2.vocab_size(), 2000);
  ASSERT_TRUE(gpt2.token_to_id("<|endoftext|>").has_value());
  EXPECT_TRUE(gpt2.is_special(*gpt2.token_to_id("<|endoftext|>")));
  EXPECT_TRUE(gpt2.prefix_ids().empty());
  const Tokenizer llama2 = Tokenizer::from_json(read("llama2.json"));
  EXPECT_EQ(llama2.prefix_ids(), std::vector<int32_t>{1});
  EXPECT_EQ(llama2.id_to_token(3), "<0x00>");
  EXPECT_EQ(llama2.encode("", true), std::vector<int32_t>{1});
  EXPECT_TRUE(llama2.encode("", false).empty());
}

}  // namespace
