#include "weft/text/pre_tokenizer.h"

#include <string>

#include "weft/text/byte_level.h"
#include "weft/text/json_util.h"
#include "weft/text/regex.h"
#include "weft/text/unicode.h"

namespace weft::text {

namespace {

using detail::get;
using detail::get_or;

struct ByteLevel final : PreTokenizer {
  bool add_prefix_space = false;
  std::unique_ptr<Regex> re;  // null: no regex
  void pre_tokenize(Piece p, const PieceSink& out) const override {
    if (add_prefix_space && !p.text.starts_with(' ')) p.text.insert(0, " ");
    auto mapped = [&](Piece&& q) {
      std::string m;
      m.reserve(q.text.size() * 2);
      append_byte_chars(m, q.text);
      q.text = std::move(m);
      out(std::move(q));
    };
    if (re)
      split_piece(p, regex_segments(*re, p.text), SplitBehavior::isolated, false,
                  PieceSink(mapped));
    else if (!p.text.empty())
      mapped(std::move(p));
  }
};

struct Split final : PreTokenizer {
  std::unique_ptr<Regex> re;  // or a literal:
  std::string literal;
  SplitBehavior behavior = SplitBehavior::isolated;
  bool invert = false;
  void pre_tokenize(Piece p, const PieceSink& out) const override {
    if (re) {
      split_piece(p, regex_segments(*re, p.text), behavior, invert, out);
    } else if (literal.empty()) {
      split_piece(p, {{0, p.text.size(), false}}, behavior, invert, out);
    } else {
      split_piece(p, string_segments(literal, p.text), behavior, invert, out);
    }
  }
};

enum class Prepend { always, first, never };

struct Metaspace final : PreTokenizer {
  std::string replacement;
  char32_t replacement_char = 0;
  Prepend prepend = Prepend::always;
  bool split = true;
  void pre_tokenize(Piece p, const PieceSink& out) const override {
    Piece q{std::string(), p.at_origin};
    q.text.reserve(p.text.size() + replacement.size());
    for (const char c : p.text) {
      if (c == ' ')
        q.text += replacement;
      else
        q.text += c;
    }
    const bool starts = q.text.starts_with(replacement);
    if ((prepend == Prepend::always && !starts) ||
        (prepend == Prepend::first && !starts && q.at_origin))
      q.text.insert(0, replacement);
    if (split) {
      const char32_t r = replacement_char;
      split_piece(q, char_segments([r](char32_t c) { return c == r; }, q.text),
                  SplitBehavior::merged_with_next, false, out);
    } else if (!q.text.empty()) {
      out(std::move(q));
    }
  }
};

struct CharSplit final : PreTokenizer {
  bool (*pred)(char32_t) = nullptr;
  SplitBehavior behavior = SplitBehavior::isolated;
  void pre_tokenize(Piece p, const PieceSink& out) const override {
    split_piece(p, char_segments(pred, p.text), behavior, false, out);
  }
};

// Whitespace: the runs of \w+ and of [^\w\s]+ (the regex crate's classes),
// whitespace dropped.
struct Whitespace final : PreTokenizer {
  void pre_tokenize(Piece p, const PieceSink& out) const override {
    const std::string& s = p.text;
    size_t i = 0;
    while (i < s.size()) {
      size_t len = 0;
      char32_t c = next_char(s, i, len);
      if (is_whitespace(c) && !is_word(c)) {
        i += len;
        continue;
      }
      const bool word = is_word(c);
      const size_t b = i;
      i += len;
      while (i < s.size()) {
        c = next_char(s, i, len);
        if (word ? !is_word(c) : (is_word(c) || is_whitespace(c))) break;
        i += len;
      }
      out(Piece{s.substr(b, i - b), p.at_origin && b == 0});
    }
  }
};

// Each item's parts go to the next item; the last item's to `out`.
struct Sequence final : PreTokenizer {
  std::vector<std::unique_ptr<PreTokenizer>> items;
  void pre_tokenize(Piece p, const PieceSink& out) const override { run(0, std::move(p), out); }
  void run(size_t k, Piece p, const PieceSink& out) const {
    if (k == items.size()) {
      out(std::move(p));
      return;
    }
    auto next = [&, k](Piece&& q) { run(k + 1, std::move(q), out); };
    items[k]->pre_tokenize(std::move(p), PieceSink(next));
  }
};

Prepend prepend_scheme(const nlohmann::json& spec, const std::string& what) {
  if (spec.contains("prepend_scheme") && !spec.at("prepend_scheme").is_null()) {
    const auto s = get<std::string>(spec, "prepend_scheme", what);
    if (s == "always") return Prepend::always;
    if (s == "first") return Prepend::first;
    if (s == "never") return Prepend::never;
    WEFT_FAIL("tokenizer.json: {} has prepend_scheme '{}' (always, first or never)", what, s);
  }
  return get_or<bool>(spec, "add_prefix_space", true, what) ? Prepend::always : Prepend::never;
}

}  // namespace

static std::unique_ptr<PreTokenizer> make_metaspace(const nlohmann::json& spec,
                                                    const std::string& what) {
  auto m = std::make_unique<Metaspace>();
  m->replacement = get_or<std::string>(spec, "replacement", "\xE2\x96\x81", what);
  size_t len = 0;
  WEFT_CHECK(!m->replacement.empty() && invalid_utf8_offset(m->replacement) == std::string::npos &&
                 (next_char(m->replacement, 0, len), len == m->replacement.size()),
             "tokenizer.json: {} needs a replacement of one character", what);
  m->replacement_char = next_char(m->replacement, 0, len);
  m->prepend = prepend_scheme(spec, what);
  m->split = get_or<bool>(spec, "split", true, what);
  return m;
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& spec) {
  if (spec.is_null()) return nullptr;
  const std::string type = detail::type_of(spec, "a pre-tokenizer");
  const std::string what = "the " + type + " pre-tokenizer";
  if (type == "ByteLevel") {
    auto b = std::make_unique<ByteLevel>();
    b->add_prefix_space = get_or<bool>(spec, "add_prefix_space", true, what);
    if (get_or<bool>(spec, "use_regex", true, what)) b->re = std::make_unique<Regex>(kGpt2Regex);
    return b;
  }
  if (type == "Split") {
    auto s = std::make_unique<Split>();
    auto [is_regex, text] = detail::pattern(spec, what);
    if (is_regex)
      s->re = std::make_unique<Regex>(text);
    else
      s->literal = text;
    s->behavior = split_behavior(get<std::string>(spec, "behavior", what));
    s->invert = get_or<bool>(spec, "invert", false, what);
    return s;
  }
  if (type == "Metaspace") return make_metaspace(spec, what);
  if (type == "Digits") {
    auto d = std::make_unique<CharSplit>();
    d->pred = is_numeric;
    d->behavior = get_or<bool>(spec, "individual_digits", false, what) ? SplitBehavior::isolated
                                                                       : SplitBehavior::contiguous;
    return d;
  }
  if (type == "Punctuation") {
    auto d = std::make_unique<CharSplit>();
    d->pred = is_punctuation;
    d->behavior = split_behavior(get_or<std::string>(spec, "behavior", "Isolated", what));
    return d;
  }
  if (type == "WhitespaceSplit") {
    auto d = std::make_unique<CharSplit>();
    d->pred = is_whitespace;
    d->behavior = SplitBehavior::removed;
    return d;
  }
  if (type == "Whitespace") return std::make_unique<Whitespace>();
  if (type == "Sequence") {
    auto s = std::make_unique<Sequence>();
    const auto& items = detail::field(spec, "pretokenizers", what);
    WEFT_CHECK(items.is_array(), "tokenizer.json: {} has \"pretokenizers\" that is not a list",
               what);
    for (const auto& item : items)
      if (auto p = make_pre_tokenizer(item)) s->items.push_back(std::move(p));
    return s;
  }
  WEFT_FAIL(
      "tokenizer.json: the pre-tokenizer {} is not supported by weft (it reads ByteLevel, Split, "
      "Metaspace, Digits, Punctuation, Whitespace, WhitespaceSplit and Sequence)",
      type);
}

}  // namespace weft::text
