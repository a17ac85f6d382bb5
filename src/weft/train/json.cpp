#include "weft/train/json.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <system_error>

namespace weft::train {

std::string_view json_type_name(Json::Type t) {
  switch (t) {
    case Json::Type::null: return "null";
    case Json::Type::boolean: return "boolean";
    case Json::Type::integer: return "integer";
    case Json::Type::number: return "number";
    case Json::Type::string: return "string";
    case Json::Type::array: return "array";
    case Json::Type::object: return "object";
  }
  return "?";
}

namespace {

[[noreturn]] void wrong_type(Json::Type want, Json::Type got) {
  WEFT_FAIL("expected a JSON {}, got {}", json_type_name(want), json_type_name(got));
}

}  // namespace

bool Json::as_bool() const {
  if (!is_bool()) wrong_type(Type::boolean, type());
  return std::get<bool>(value_);
}

int64_t Json::as_int() const {
  if (!is_integer()) wrong_type(Type::integer, type());
  return std::get<int64_t>(value_);
}

double Json::as_double() const {
  if (is_integer()) return static_cast<double>(std::get<int64_t>(value_));
  if (type() != Type::number) wrong_type(Type::number, type());
  return std::get<double>(value_);
}

const std::string& Json::as_string() const {
  if (!is_string()) wrong_type(Type::string, type());
  return std::get<std::string>(value_);
}

const Json::Array& Json::as_array() const {
  if (!is_array()) wrong_type(Type::array, type());
  return std::get<Array>(value_);
}

Json::Array& Json::as_array() {
  if (!is_array()) wrong_type(Type::array, type());
  return std::get<Array>(value_);
}

const Json::Object& Json::as_object() const {
  if (!is_object()) wrong_type(Type::object, type());
  return std::get<Object>(value_);
}

Json::Object& Json::as_object() {
  if (!is_object()) wrong_type(Type::object, type());
  return std::get<Object>(value_);
}

const Json* Json::find(std::string_view key) const {
  for (const auto& [k, v] : as_object()) {
    if (k == key) return &v;
  }
  return nullptr;
}

const Json& Json::at(std::string_view key) const {
  const Json* v = find(key);
  WEFT_CHECK(v != nullptr, "JSON object has no key \"{}\"", key);
  return *v;
}

Json& Json::operator[](std::string_view key) {
  if (is_null()) value_ = Object{};
  Object& members = as_object();
  for (auto& [k, v] : members) {
    if (k == key) return v;
  }
  members.emplace_back(std::string(key), Json());
  return members.back().second;
}

const Json& Json::at(size_t index) const {
  const Array& a = as_array();
  WEFT_CHECK(index < a.size(), "JSON array index {} is out of range (size {})", index, a.size());
  return a[index];
}

void Json::push_back(Json v) {
  if (is_null()) value_ = Array{};
  as_array().push_back(std::move(v));
}

size_t Json::size() const {
  if (is_object()) return as_object().size();
  return as_array().size();
}

bool operator==(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integer() && b.is_integer()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  return a.value_ == b.value_;
}

// ---- writer ----

namespace {

// Length of the valid UTF-8 sequence (shortest form, no surrogates, at most
// U+10FFFF) that starts with a non-ASCII byte at s[pos]; 0 when invalid.
size_t utf8_sequence(std::string_view s, size_t pos) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[pos + i]); };
  const unsigned char b0 = byte(0);
  size_t n;
  uint32_t cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
    cp = b0 & 0x1Fu;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    cp = b0 & 0x0Fu;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    cp = b0 & 0x07u;
  } else {
    return 0;
  }
  if (s.size() - pos < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i) & 0x3Fu);
  }
  if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
      (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
    return 0;
  }
  return n;
}

void write_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (static_cast<unsigned char>(c) >= 0x80) {
      const size_t n = utf8_sequence(s, i);
      WEFT_CHECK(n > 0, "cannot write a string with invalid UTF-8 at byte {} as JSON", i);
      out.append(s.substr(i, n));
      i += n - 1;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += "\\u00";
          out += kHex[(c >> 4) & 0xf];
          out += kHex[c & 0xf];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void newline(std::string& out, int indent, int level) {
  if (indent < 0) return;
  out += '\n';
  out.append(static_cast<size_t>(indent * level), ' ');
}

}  // namespace

void Json::dump_to(std::string& out, int indent, int level) const {
  switch (type()) {
    case Type::null: out += "null"; return;
    case Type::boolean: out += std::get<bool>(value_) ? "true" : "false"; return;
    case Type::integer: out += std::to_string(std::get<int64_t>(value_)); return;
    case Type::number: {
      double d = std::get<double>(value_);
      WEFT_CHECK(std::isfinite(d), "cannot write {} as JSON: JSON has no NaN or Infinity", d);
      char buf[32];
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
      std::string_view text(buf, static_cast<size_t>(end - buf));
      out += text;
      // Keep it a double when read back: 2.0 prints as "2" otherwise.
      if (text.find_first_of(".e") == std::string_view::npos) out += ".0";
      return;
    }
    case Type::string: write_string(out, std::get<std::string>(value_)); return;
    case Type::array: {
      const Array& a = std::get<Array>(value_);
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += ',';
        newline(out, indent, level + 1);
        a[i].dump_to(out, indent, level + 1);
      }
      if (!a.empty()) newline(out, indent, level);
      out += ']';
      return;
    }
    case Type::object: {
      const Object& o = std::get<Object>(value_);
      out += '{';
      for (size_t i = 0; i < o.size(); ++i) {
        if (i) out += ',';
        newline(out, indent, level + 1);
        write_string(out, o[i].first);
        out += indent < 0 ? ":" : ": ";
        o[i].second.dump_to(out, indent, level + 1);
      }
      if (!o.empty()) newline(out, indent, level);
      out += '}';
      return;
    }
  }
}

std::string Json::dump(int indent) const {
  std::string out;
  dump_to(out, indent, 0);
  return out;
}

// ---- parser ----

namespace {

class Parser {
 public:
  Parser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  Json parse_document() {
    skip_space();
    Json v = parse_value(0);
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const { fail_at(pos_, what); }
  [[noreturn]] void fail_at(size_t at, std::string_view what) const {
    throw JsonError(format("{}: invalid JSON at byte {}: {}", source_, at, what), at);
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  void skip_space() {
    while (!at_end()) {
      char c = text_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++pos_;
    }
  }

  void expect(char c, std::string_view context) {
    if (peek() != c) {
      if (at_end()) fail(format("the text ends where {} was expected", context));
      fail(format("expected {}", context));
    }
    ++pos_;
  }

  Json parse_value(int depth) {
    if (at_end()) fail("the text ends where a value was expected");
    switch (peek()) {
      case '{': return parse_object(depth + 1);
      case '[': return parse_array(depth + 1);
      case '"': return Json(parse_string());
      case 't': literal("true"); return Json(true);
      case 'f': literal("false"); return Json(false);
      case 'n': literal("null"); return Json();
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return parse_number();
        fail(format("unexpected character '{}' where a value was expected", peek()));
    }
  }

  void literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) fail(format("expected '{}'", word));
    pos_ += word.size();
  }

  Json parse_object(int depth) {
    if (depth > Json::kMaxDepth) fail(format("nesting deeper than {} levels", Json::kMaxDepth));
    ++pos_;  // '{'
    Json::Object members;
    skip_space();
    if (peek() == '}') {
      ++pos_;
      return Json(std::move(members));
    }
    while (true) {
      skip_space();
      size_t key_at = pos_;
      if (peek() != '"')
        fail(at_end() ? "the text ends inside an object" : "expected a string key");
      std::string key = parse_string();
      for (const auto& m : members) {
        if (m.first == key) fail_at(key_at, format("duplicate key \"{}\"", key));
      }
      skip_space();
      expect(':', "':' after an object key");
      skip_space();
      members.emplace_back(std::move(key), parse_value(depth));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}', "',' or '}' in an object");
      return Json(std::move(members));
    }
  }

  Json parse_array(int depth) {
    if (depth > Json::kMaxDepth) fail(format("nesting deeper than {} levels", Json::kMaxDepth));
    ++pos_;  // '['
    Json::Array items;
    skip_space();
    if (peek() == ']') {
      ++pos_;
      return Json(std::move(items));
    }
    while (true) {
      skip_space();
      items.push_back(parse_value(depth));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect(']', "',' or ']' in an array");
      return Json(std::move(items));
    }
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  uint32_t hex4() {
    if (text_.size() - pos_ < 4) fail("the text ends inside a \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_];
      uint32_t d;
      if (c >= '0' && c <= '9') {
        d = static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        d = static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        d = static_cast<uint32_t>(c - 'A' + 10);
      } else {
        fail("expected 4 hex digits after \\u");
      }
      v = v * 16 + d;
      ++pos_;
    }
    return v;
  }

  // Copies one UTF-8 encoded code point starting at pos_.
  void copy_utf8(std::string& out) {
    size_t n = utf8_sequence(text_, pos_);
    if (n == 0) fail("invalid UTF-8 in a string");
    out.append(text_.substr(pos_, n));
    pos_ += n;
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (at_end()) fail("the text ends inside a string");
      char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) fail("unescaped control character in a string");
      if (static_cast<unsigned char>(c) >= 0x80) {
        copy_utf8(out);
        continue;
      }
      if (c != '\\') {
        out += c;
        ++pos_;
        continue;
      }
      ++pos_;
      if (at_end()) fail("the text ends inside a string");
      char e = text_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          size_t esc_at = pos_ - 2;
          uint32_t cp = hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail_at(esc_at, "unpaired low surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (text_.substr(pos_, 2) != "\\u") {
              fail_at(esc_at, "high surrogate in \\u escape without its low surrogate");
            }
            pos_ += 2;
            uint32_t lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) {
              fail_at(esc_at, "high surrogate in \\u escape without its low surrogate");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default: fail_at(pos_ - 1, format("invalid escape '\\{}' in a string", e));
      }
    }
  }

  Json parse_number() {
    size_t start = pos_;
    bool integer = true;
    if (peek() == '-') ++pos_;
    auto digits = [&] {
      size_t from = pos_;
      while (!at_end() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    size_t int_at = pos_;
    size_t n = digits();
    if (n == 0) fail("expected a digit");
    if (n > 1 && text_[int_at] == '0') fail_at(int_at, "leading zeros are not allowed in numbers");
    if (peek() == '.') {
      integer = false;
      ++pos_;
      if (digits() == 0) fail("expected a digit after the decimal point");
    }
    if (peek() == 'e' || peek() == 'E') {
      integer = false;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (digits() == 0) fail("expected a digit in the exponent");
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    if (integer) {
      int64_t v = 0;
      auto [ptr, ec] = std::from_chars(first, last, v);
      if (ec == std::errc() && ptr == last) return Json(v);
      // Out of int64 range: keep it as a double.
    }
    double d = 0;
    auto [ptr, ec] = std::from_chars(first, last, d);
    if (ec == std::errc::result_out_of_range) fail_at(start, "number out of range");
    if (ec != std::errc() || ptr != last) fail_at(start, "malformed number");
    return Json(d);
  }

  std::string_view text_;
  std::string_view source_;
  size_t pos_ = 0;
};

}  // namespace

Json parse_json(std::string_view text, std::string_view source) {
  return Parser(text, source).parse_document();
}

}  // namespace weft::train
