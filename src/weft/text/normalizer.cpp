#include "weft/text/normalizer.h"

#include <vector>

#include "weft/text/json_util.h"
#include "weft/text/regex.h"
#include "weft/text/unicode.h"

namespace weft::text {

namespace {

using detail::get;
using detail::get_or;

struct Prepend final : Normalizer {
  std::string prefix;
  void normalize(std::string& s) const override {
    if (!s.empty()) s.insert(0, prefix);
  }
};

struct Replace final : Normalizer {
  std::unique_ptr<Regex> re;  // or a literal:
  std::string literal, content;
  void normalize(std::string& s) const override {
    std::string out;
    size_t last = 0;
    auto put = [&](size_t b, size_t e) {
      out.append(s, last, b - last);
      out += content;
      last = e;
    };
    if (re) {
      for (const auto& [b, e] : re->find_all(s)) put(b, e);
    } else {
      if (literal.empty()) return;
      for (size_t pos = s.find(literal); pos != std::string::npos;
           pos = s.find(literal, pos + literal.size()))
        put(pos, pos + literal.size());
    }
    if (last == 0 && out.empty()) return;
    out.append(s, last, std::string::npos);
    s = std::move(out);
  }
};

struct Lowercase final : Normalizer {
  void normalize(std::string& s) const override { s = lowercase(s); }
};

struct Unicode final : Normalizer {
  NormalForm form;
  explicit Unicode(NormalForm f) : form(f) {}
  void normalize(std::string& s) const override { s = text::normalize(s, form); }
};

struct Strip final : Normalizer {
  bool left = true, right = true;
  void normalize(std::string& s) const override {
    size_t b = 0, e = s.size();
    if (left) {
      while (b < e) {
        size_t len = 0;
        if (!is_whitespace(next_char(s, b, len))) break;
        b += len;
      }
    }
    if (right) {
      while (e > b) {
        size_t start = e - 1;
        while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
        size_t len = 0;
        if (!is_whitespace(next_char(s, start, len))) break;
        e = start;
      }
    }
    s = s.substr(b, e - b);
  }
};

struct Sequence final : Normalizer {
  std::vector<std::unique_ptr<Normalizer>> items;
  void normalize(std::string& s) const override {
    for (const auto& n : items) n->normalize(s);
  }
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& spec) {
  if (spec.is_null()) return nullptr;
  const std::string type = detail::type_of(spec, "a normalizer");
  const std::string what = "the " + type + " normalizer";
  if (type == "Prepend") {
    auto n = std::make_unique<Prepend>();
    n->prefix = get<std::string>(spec, "prepend", what);
    return n;
  }
  if (type == "Replace") {
    auto n = std::make_unique<Replace>();
    auto [is_regex, text] = detail::pattern(spec, what);
    if (is_regex)
      n->re = std::make_unique<Regex>(text);
    else
      n->literal = text;
    n->content = get<std::string>(spec, "content", what);
    return n;
  }
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "NFC") return std::make_unique<Unicode>(NormalForm::nfc);
  if (type == "NFD") return std::make_unique<Unicode>(NormalForm::nfd);
  if (type == "NFKC") return std::make_unique<Unicode>(NormalForm::nfkc);
  if (type == "NFKD") return std::make_unique<Unicode>(NormalForm::nfkd);
  if (type == "Strip") {
    auto n = std::make_unique<Strip>();
    n->left = get_or<bool>(spec, "strip_left", true, what);
    n->right = get_or<bool>(spec, "strip_right", true, what);
    return n;
  }
  if (type == "Sequence") {
    auto n = std::make_unique<Sequence>();
    const auto& items = detail::field(spec, "normalizers", what);
    WEFT_CHECK(items.is_array(), "tokenizer.json: {} has \"normalizers\" that is not a list", what);
    for (const auto& item : items)
      if (auto m = make_normalizer(item)) n->items.push_back(std::move(m));
    return n;
  }
  WEFT_FAIL(
      "tokenizer.json: the normalizer {} is not supported by weft (it reads Prepend, Replace, "
      "Lowercase, NFC, NFD, NFKC, NFKD, Strip and Sequence)",
      type);
}

}  // namespace weft::text
