#include "weft/text/decoder.h"

#include "weft/text/byte_level.h"
#include "weft/text/json_util.h"
#include "weft/text/regex.h"
#include "weft/text/unicode.h"

namespace weft::text {

namespace {

using detail::get;
using detail::get_or;

std::vector<char32_t> chars_of(const std::string& s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    out.push_back(next_char(s, i, len));
    i += len;
  }
  return out;
}

struct ByteLevel final : Decoder {
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const auto& t : tokens) {
      const size_t mark = bytes.size();
      bool all = true;
      for (size_t i = 0; i < t.size();) {
        size_t len = 0;
        const int b = char_byte(next_char(t, i, len));
        if (b < 0) {
          all = false;
          break;
        }
        bytes += static_cast<char>(b);
        i += len;
      }
      if (!all) {
        bytes.resize(mark);
        bytes += t;
      }
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

struct Metaspace final : Decoder {
  char32_t replacement = 0x2581;
  bool prepend = true;  // prepend_scheme other than "never"
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t k = 0; k < t.size();) {
        size_t len = 0;
        const char32_t c = next_char(t, k, len);
        if (c == replacement) {
          if (!(i == 0 && prepend)) out += ' ';
        } else {
          out.append(t, k, len);
        }
        k += len;
      }
      tokens[i] = std::move(out);
    }
  }
};

struct Replace final : Decoder {
  std::unique_ptr<Regex> re;
  std::string literal, content;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      std::string out;
      size_t last = 0;
      auto put = [&](size_t b, size_t e) {
        out.append(t, last, b - last);
        out += content;
        last = e;
      };
      if (re) {
        for (const auto& [b, e] : re->find_all(t)) put(b, e);
      } else if (!literal.empty()) {
        for (size_t p = t.find(literal); p != std::string::npos;
             p = t.find(literal, p + literal.size()))
          put(p, p + literal.size());
      }
      out.append(t, last, std::string::npos);
      t = std::move(out);
    }
  }
};

// "<0xHH>" -> the byte (Rust's u8::from_str_radix on the two characters).
int byte_token(const std::string& t) {
  if (t.size() != 6 || !t.starts_with("<0x") || t[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (t[3] == '+') return hex(t[4]);
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

struct ByteFallback final : Decoder {
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    auto flush = [&] {
      if (bytes.empty()) return;
      if (invalid_utf8_offset(bytes) == std::string::npos)
        out.push_back(bytes);
      else
        for (size_t k = 0; k < bytes.size(); ++k) out.emplace_back("\xEF\xBF\xBD");
      bytes.clear();
    };
    for (auto& t : tokens) {
      const int b = byte_token(t);
      if (b >= 0) {
        bytes += static_cast<char>(b);
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
};

struct Fuse final : Decoder {
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

struct Strip final : Decoder {
  char32_t content = ' ';
  size_t start = 0, stop = 0;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      const std::vector<char32_t> cs = chars_of(t);
      size_t b = 0;
      for (size_t i = 0; i < cs.size() && i < start; ++i) {
        if (cs[i] != content) break;
        b = i + 1;
      }
      size_t e = cs.size();
      for (size_t i = 0; i < cs.size() && i < stop; ++i) {
        if (cs[cs.size() - 1 - i] != content) break;
        e = cs.size() - i - 1;
      }
      std::string out;
      for (size_t i = b; i < e; ++i) append_utf8(out, cs[i]);
      t = std::move(out);
    }
  }
};

struct Sequence final : Decoder {
  std::vector<std::unique_ptr<Decoder>> items;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& d : items) d->decode_chain(tokens);
  }
};

char32_t one_char(const std::string& s, const std::string& what) {
  const auto cs = chars_of(s);
  WEFT_CHECK(invalid_utf8_offset(s) == std::string::npos && cs.size() == 1,
             "tokenizer.json: {} needs one character, not '{}'", what, s);
  return cs[0];
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const nlohmann::json& spec) {
  if (spec.is_null()) return nullptr;
  const std::string type = detail::type_of(spec, "a decoder");
  const std::string what = "the " + type + " decoder";
  if (type == "ByteLevel") return std::make_unique<ByteLevel>();
  if (type == "Metaspace") {
    auto m = std::make_unique<Metaspace>();
    m->replacement = one_char(get_or<std::string>(spec, "replacement", "\xE2\x96\x81", what), what);
    if (spec.contains("prepend_scheme") && !spec.at("prepend_scheme").is_null())
      m->prepend = get<std::string>(spec, "prepend_scheme", what) != "never";
    else
      m->prepend = get_or<bool>(spec, "add_prefix_space", true, what);
    return m;
  }
  if (type == "Replace") {
    auto r = std::make_unique<Replace>();
    auto [is_regex, text] = detail::pattern(spec, what);
    if (is_regex)
      r->re = std::make_unique<Regex>(text);
    else
      r->literal = text;
    r->content = get<std::string>(spec, "content", what);
    return r;
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "Strip") {
    auto s = std::make_unique<Strip>();
    s->content = one_char(get<std::string>(spec, "content", what), what);
    s->start = get<size_t>(spec, "start", what);
    s->stop = get<size_t>(spec, "stop", what);
    return s;
  }
  if (type == "Sequence") {
    auto s = std::make_unique<Sequence>();
    const auto& items = detail::field(spec, "decoders", what);
    WEFT_CHECK(items.is_array(), "tokenizer.json: {} has \"decoders\" that is not a list", what);
    for (const auto& item : items)
      if (auto d = make_decoder(item)) s->items.push_back(std::move(d));
    return s;
  }
  WEFT_FAIL(
      "tokenizer.json: the decoder {} is not supported by weft (it reads ByteLevel, Metaspace, "
      "Replace, ByteFallback, Fuse, Strip and Sequence)",
      type);
}

}  // namespace weft::text
