#include "weft/text/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "weft/text/added_tokens.h"
#include "weft/text/bpe.h"
#include "weft/text/decoder.h"
#include "weft/text/json_util.h"
#include "weft/text/normalizer.h"
#include "weft/text/pre_tokenizer.h"
#include "weft/text/unicode.h"

namespace weft::text {

struct Tokenizer::Impl {
  std::string json, source;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Bpe> model;
  std::unique_ptr<Decoder> decoder;
  std::vector<AddedToken> added;
  // What each added token decodes to: its content, normalized where the token
  // is (as the library's id_to_token gives it).
  std::vector<std::string> added_text;
  std::unordered_map<int32_t, size_t> added_by_id;
  std::unordered_map<std::string, int32_t> added_by_content;
  AddedMatcher raw_matcher, normalized_matcher;
  std::vector<int32_t> prefix, suffix;
  int32_t vocab_size = 0;

  void tokenize_piece(const std::string& piece, EncodeCache* cache,
                      std::vector<int32_t>& out) const {
    if (cache) {
      if (const auto* hit = cache->find(piece)) {
        out.insert(out.end(), hit->begin(), hit->end());
        return;
      }
      const size_t mark = out.size();
      model->tokenize(piece, out);
      if (piece.size() < 256)
        cache->insert(piece,
                      std::vector<int32_t>(out.begin() + static_cast<long>(mark), out.end()));
      return;
    }
    model->tokenize(piece, out);
  }

  // A part of the text that is no added token, normalized.
  void encode_normalized(std::string text, bool at_origin, EncodeCache* cache,
                         std::vector<int32_t>& out) const {
    if (normalizer) normalizer->normalize(text);
    auto run = [&](std::string part, bool origin) {
      if (part.empty()) return;
      if (!pre_tokenizer) {
        tokenize_piece(part, cache, out);
        return;
      }
      auto to_model = [&](Piece&& p) { tokenize_piece(p.text, cache, out); };
      pre_tokenizer->pre_tokenize(Piece{std::move(part), origin}, PieceSink(to_model));
    };
    if (normalized_matcher.empty()) {
      run(std::move(text), at_origin);
      return;
    }
    for (const Chunk& c : normalized_matcher.split(text)) {
      if (c.id >= 0)
        out.push_back(c.id);
      else
        run(text.substr(c.begin, c.end - c.begin), at_origin && c.begin == 0);
    }
  }
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

namespace {

// TemplateProcessing's single template: the ids before and after $A.
void template_ids(const nlohmann::json& spec, std::vector<int32_t>& prefix,
                  std::vector<int32_t>& suffix) {
  const std::string what = "the TemplateProcessing post-processor";
  const auto& single = detail::field(spec, "single", what);
  const auto& specials = detail::field(spec, "special_tokens", what);
  WEFT_CHECK(single.is_array(), "tokenizer.json: {} has a \"single\" template that is not a list",
             what);
  bool seen_a = false;
  std::vector<int32_t> pre, suf;
  for (const auto& piece : single) {
    if (piece.is_object() && piece.contains("Sequence")) {
      WEFT_CHECK(!seen_a, "tokenizer.json: {} names $A twice in its single template", what);
      seen_a = true;
    } else if (piece.is_object() && piece.contains("SpecialToken")) {
      const auto name = detail::get<std::string>(piece.at("SpecialToken"), "id", what);
      WEFT_CHECK(specials.is_object() && specials.contains(name),
                 "tokenizer.json: {} uses the special token '{}' it does not define", what, name);
      for (const auto& id : detail::field(specials.at(name), "ids", what)) {
        WEFT_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 &&
                       id.get<int64_t>() < (int64_t{1} << 26),
                   "tokenizer.json: {} gives '{}' the id {}", what, name, id.dump());
        (seen_a ? suf : pre).push_back(id.get<int32_t>());
      }
    } else {
      WEFT_FAIL("tokenizer.json: {} has a template piece {} weft does not know", what,
                piece.dump());
    }
  }
  WEFT_CHECK(seen_a, "tokenizer.json: {} has no $A in its single template", what);
  prefix.insert(prefix.begin(), pre.begin(), pre.end());
  suffix.insert(suffix.end(), suf.begin(), suf.end());
}

void post_processor(const nlohmann::json& spec, std::vector<int32_t>& prefix,
                    std::vector<int32_t>& suffix) {
  if (spec.is_null()) return;
  const auto type = detail::type_of(spec, "the post-processor");
  if (type == "ByteLevel") return;  // offsets only
  if (type == "TemplateProcessing") return template_ids(spec, prefix, suffix);
  if (type == "Sequence") {
    const auto& items = detail::field(spec, "processors", "the Sequence post-processor");
    WEFT_CHECK(items.is_array(),
               "tokenizer.json: the Sequence post-processor's processors is not a list");
    for (const auto& item : items) post_processor(item, prefix, suffix);
    return;
  }
  WEFT_FAIL(
      "tokenizer.json: the post-processor {} is not supported by weft (it reads "
      "TemplateProcessing, "
      "ByteLevel and Sequence)",
      type);
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    WEFT_FAIL("{} is not valid JSON (at byte {}); pass a Hugging Face tokenizer.json", source,
              e.byte);
  }
  WEFT_CHECK(
      j.is_object() && j.contains("model"),
      "{} is not a Hugging Face tokenizer.json (no \"model\"); pass the tokenizer.json a model "
      "directory holds",
      source);
  auto impl = std::make_unique<Impl>();
  impl->json = std::string(text);
  impl->source = source;
  try {
    for (const char* key : {"truncation", "padding"})
      WEFT_CHECK(!j.contains(key) || j.at(key).is_null(),
                 "tokenizer.json: {} is set, which weft does not support; set it to null", key);
    impl->normalizer = make_normalizer(j.value("normalizer", nlohmann::json()));
    impl->pre_tokenizer = make_pre_tokenizer(j.value("pre_tokenizer", nlohmann::json()));
    impl->model = std::make_unique<Bpe>(j.at("model"));
    impl->decoder = make_decoder(j.value("decoder", nlohmann::json()));
    post_processor(j.value("post_processor", nlohmann::json()), impl->prefix, impl->suffix);
    impl->added = parse_added_tokens(j.value("added_tokens", nlohmann::json()));
  } catch (const Error& e) {
    throw Error(source + ": " + e.what(), e.where());
  }
  impl->vocab_size = impl->model->size();
  std::vector<AddedToken> raw, norm;
  std::vector<std::string> raw_p, norm_p;
  for (size_t k = 0; k < impl->added.size(); ++k) {
    const AddedToken& a = impl->added[k];
    impl->added_by_id[a.id] = k;
    impl->added_by_content[a.content] = a.id;
    impl->vocab_size = std::max(impl->vocab_size, a.id + 1);
    if (a.normalized) {
      std::string p = a.content;
      if (impl->normalizer) impl->normalizer->normalize(p);
      impl->added_text.push_back(p);
      norm.push_back(a);
      norm_p.push_back(std::move(p));
    } else {
      impl->added_text.push_back(a.content);
      raw.push_back(a);
      raw_p.push_back(a.content);
    }
  }
  for (const int32_t id : impl->prefix) impl->vocab_size = std::max(impl->vocab_size, id + 1);
  for (const int32_t id : impl->suffix) impl->vocab_size = std::max(impl->vocab_size, id + 1);
  impl->raw_matcher = AddedMatcher(std::move(raw), std::move(raw_p));
  impl->normalized_matcher = AddedMatcher(std::move(norm), std::move(norm_p));
  return Tokenizer(std::move(impl));
}

std::string Tokenizer::resolve_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const std::string file = (fs::path(path) / "tokenizer.json").string();
    WEFT_CHECK(
        fs::is_regular_file(file, ec),
        "{} holds no tokenizer.json; pass a Hugging Face tokenizer.json or the directory that "
        "holds one",
        path);
    return file;
  }
  WEFT_CHECK(fs::exists(path, ec),
             "{} does not exist; pass a Hugging Face tokenizer.json or its directory", path);
  return path;
}

Tokenizer Tokenizer::from_file(const std::string& path) {
  const std::string file = resolve_path(path);
  std::ifstream in(file, std::ios::binary);
  WEFT_CHECK(in.good(), "cannot read {}", file);
  std::stringstream ss;
  ss << in.rdbuf();
  return from_json(ss.str(), file);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens,
                                       EncodeCache* cache) const {
  const Impl& m = *impl_;
  const size_t bad = invalid_utf8_offset(text);
  WEFT_CHECK(bad == std::string_view::npos, "the text is not UTF-8 (byte offset {})", bad);
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + m.prefix.size() + m.suffix.size() + 1);
  if (add_special_tokens) out.insert(out.end(), m.prefix.begin(), m.prefix.end());
  if (m.raw_matcher.empty()) {
    if (!text.empty()) m.encode_normalized(std::string(text), true, cache, out);
  } else {
    for (const Chunk& c : m.raw_matcher.split(text)) {
      if (c.id >= 0)
        out.push_back(c.id);
      else
        m.encode_normalized(std::string(text.substr(c.begin, c.end - c.begin)), c.begin == 0, cache,
                            out);
    }
  }
  if (add_special_tokens) out.insert(out.end(), m.suffix.begin(), m.suffix.end());
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Impl& m = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (auto it = m.added_by_id.find(id); it != m.added_by_id.end()) {
      if (!(skip_special_tokens && m.added[it->second].special))
        tokens.push_back(m.added_text[it->second]);
      continue;
    }
    const std::string& t = m.model->id_to_token(id);
    WEFT_CHECK(!t.empty(), "token id {} (at position {}) is not in the vocabulary of {} (size {})",
               id, i, m.source, m.vocab_size);
    tokens.push_back(t);
  }
  if (!m.decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  m.decoder->decode_chain(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto it = impl_->added_by_content.find(std::string(token));
      it != impl_->added_by_content.end())
    return it->second;
  return impl_->model->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (auto it = impl_->added_by_id.find(id); it != impl_->added_by_id.end())
    return impl_->added_text[it->second];
  return impl_->model->id_to_token(id);
}

bool Tokenizer::is_special(int32_t id) const {
  auto it = impl_->added_by_id.find(id);
  return it != impl_->added_by_id.end() && impl_->added[it->second].special;
}

const std::vector<int32_t>& Tokenizer::prefix_ids() const { return impl_->prefix; }
const std::vector<int32_t>& Tokenizer::suffix_ids() const { return impl_->suffix; }
const std::string& Tokenizer::json() const { return impl_->json; }
const std::string& Tokenizer::source() const { return impl_->source; }

}  // namespace weft::text
