#include "weft/io/json.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <nlohmann/json.hpp>
#include <unordered_set>

namespace weft::io {

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

// ---- writer: nlohmann's serializer over an ordered copy ----

namespace {

using OrderedJson = nlohmann::ordered_json;

OrderedJson to_ordered(const Json& v) {
  switch (v.type()) {
    case Json::Type::null: return nullptr;
    case Json::Type::boolean: return v.as_bool();
    case Json::Type::integer: return v.as_int();
    case Json::Type::number: {
      const double d = v.as_double();
      WEFT_CHECK(std::isfinite(d), "cannot write {} as JSON: JSON has no NaN or Infinity", d);
      return d;
    }
    case Json::Type::string: return v.as_string();
    case Json::Type::array: {
      OrderedJson out = OrderedJson::array();
      auto& items = out.get_ref<OrderedJson::array_t&>();
      items.reserve(v.as_array().size());
      for (const Json& item : v.as_array()) items.push_back(to_ordered(item));
      return out;
    }
    case Json::Type::object: {
      OrderedJson out = OrderedJson::object();
      // Appended to the underlying vector: the keys are already in order, and
      // ordered_map's own insert searches for each key (quadratic).
      auto& members =
          static_cast<OrderedJson::object_t::Container&>(out.get_ref<OrderedJson::object_t&>());
      members.reserve(v.as_object().size());
      for (const auto& [key, value] : v.as_object()) members.emplace_back(key, to_ordered(value));
      return out;
    }
  }
  return nullptr;
}

}  // namespace

std::string Json::dump(int indent) const {
  const OrderedJson j = to_ordered(*this);
  try {
    // The serializer writes a short decimal that reads back to the same double
    // (with ".0" on whole numbers, so they stay numbers, not integers).
    return j.dump(indent, ' ', false, OrderedJson::error_handler_t::strict);
  } catch (const OrderedJson::type_error& e) {
    if (e.id != 316) throw;
    // Invalid UTF-8: "invalid UTF-8 byte at index N: 0xXX", or "incomplete
    // UTF-8 string; last byte: 0xXX" when the string ends inside a character.
    const std::string_view what = e.what();
    constexpr std::string_view kAt = "at index ";
    const size_t at = what.find(kAt);
    if (at == std::string_view::npos) {
      WEFT_FAIL("cannot write a string that ends inside a UTF-8 character as JSON");
    }
    const std::string_view index = what.substr(at + kAt.size());
    WEFT_FAIL("cannot write a string with invalid UTF-8 at byte {} as JSON",
              index.substr(0, index.find(':')));
  }
}

// ---- parser: nlohmann's SAX parser building a Json ----

namespace {

// A pointer into the text that publishes how far nlohmann's lexer has read,
// so the builder can say where a duplicate key or a too-deep value starts.
class TrackedChars {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackedChars() = default;
  TrackedChars(const char* p, const char** read_to) : p_(p), read_to_(read_to) {}
  reference operator*() const { return *p_; }
  TrackedChars& operator++() {
    *read_to_ = ++p_;
    return *this;
  }
  TrackedChars operator++(int) {
    TrackedChars before = *this;
    ++*this;
    return before;
  }
  friend bool operator==(const TrackedChars& a, const TrackedChars& b) { return a.p_ == b.p_; }

 private:
  const char* p_ = nullptr;
  const char** read_to_ = nullptr;
};

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// "character 'x'" for a printable ASCII character, "byte 0xNN" otherwise.
std::string describe_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u > 0x20 && u < 0x7f) return format("character '{}'", c);
  return format("byte 0x{:02x}", u);
}

// Receives nlohmann's SAX events and builds the Json, enforcing what nlohmann
// allows but weft does not: duplicate keys, nesting beyond Json::kMaxDepth,
// numbers that underflow to zero, leading zeros (nlohmann reads "01" as two
// numbers). Its parse errors are reworded with the byte offset where the text
// went wrong.
class JsonBuilder {
 public:
  JsonBuilder(std::string_view text, std::string_view source, const char* const* read_to)
      : text_(text), source_(source), read_to_(read_to) {}

  Json take() { return std::move(root_); }

  bool null() { return add(Json(), end_of_token()); }
  bool boolean(bool b) { return add(Json(b), end_of_token()); }
  bool number_integer(int64_t v) { return add(Json(v), end_of_number(v == 0)); }
  bool number_unsigned(uint64_t v) {
    const size_t end = end_of_number(v == 0);
    // Beyond int64: a double, as every other number that is not an exact int64.
    if (v > static_cast<uint64_t>(INT64_MAX)) return add(Json(static_cast<double>(v)), end);
    return add(Json(static_cast<int64_t>(v)), end);
  }
  bool number_float(double d, const std::string& token) {
    const size_t end = end_of_number(false);
    // nlohmann reads 1e-400 as 0; a number that is not zero but does not fit
    // a double is out of range, as 1e400 is.
    if (d == 0) {
      const std::string_view mantissa =
          std::string_view(token).substr(0, token.find_first_of("eE"));
      if (mantissa.find_first_of("123456789") != std::string_view::npos) {
        fail_at(end - token.size(), "number out of range");
      }
    }
    return add(Json(d), end);
  }
  bool string(std::string& s) { return add(Json(std::move(s)), end_of_token()); }
  bool binary(nlohmann::json::binary_t&) { return false; }  // never sent for JSON text

  bool start_object(size_t) { return open(Json::object()); }
  bool start_array(size_t) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(std::string& k) {
    last_end_ = end_of_token();
    Frame& f = stack_.back();
    const Json::Object& members = f.value.as_object();
    bool duplicate = false;
    if (members.size() < kIndexFrom) {
      for (const auto& m : members) duplicate = duplicate || m.first == k;
    } else {
      if (f.keys.empty()) {
        for (const auto& m : members) f.keys.insert(m.first);
      }
      duplicate = !f.keys.insert(k).second;
    }
    if (duplicate) fail_at(string_start(last_end_), format("duplicate key \"{}\"", k));
    f.key = std::move(k);
    return true;
  }

  bool parse_error(size_t position, const std::string&, const nlohmann::json::exception& e) {
    describe_error(position, e);
  }

  // A complete value followed by a NUL byte (which nlohmann takes for the end).
  void check_consumed_all() const {
    const size_t at = skip_space(last_end_);
    if (at < text_.size()) fail_at(at, "unexpected text after the JSON value");
  }

 private:
  // Objects with this many members find duplicates through a hash set.
  static constexpr size_t kIndexFrom = 32;

  struct Frame {
    Json value;
    std::string key;
    std::unordered_set<std::string> keys;
  };

  [[noreturn]] void fail_at(size_t at, std::string_view what) const {
    throw JsonError(format("{}: invalid JSON at byte {}: {}", source_, at, what), at);
  }

  size_t read() const { return static_cast<size_t>(*read_to_ - text_.data()); }

  // Strings, literals and brackets end where the lexer stopped reading.
  size_t end_of_token() const { return read(); }

  // A number ends with a digit; the lexer has read one character past it
  // unless the text ended there.
  size_t end_of_number(bool zero) const {
    const size_t r = read();
    if (zero && r >= 2 && is_digit(text_[r - 1]) && text_[r - 2] == '0') {
      fail_at(r - 2, "leading zeros are not allowed in numbers");
    }
    return r > 0 && is_digit(text_[r - 1]) ? r : r - 1;
  }

  bool open(Json container) {
    last_end_ = end_of_token();
    if (stack_.size() + 1 > static_cast<size_t>(Json::kMaxDepth)) {
      fail_at(last_end_ - 1, format("nesting deeper than {} levels", Json::kMaxDepth));
    }
    stack_.push_back(Frame{std::move(container), {}, {}});
    return true;
  }

  bool close() {
    Json done = std::move(stack_.back().value);
    stack_.pop_back();
    return add(std::move(done), end_of_token());
  }

  bool add(Json v, size_t end) {
    last_end_ = end;
    if (stack_.empty()) {
      root_ = std::move(v);
    } else if (stack_.back().value.is_array()) {
      stack_.back().value.as_array().push_back(std::move(v));
    } else {
      stack_.back().value.as_object().emplace_back(std::move(stack_.back().key), std::move(v));
    }
    return true;
  }

  size_t skip_space(size_t at) const {
    while (at < text_.size() &&
           (text_[at] == ' ' || text_[at] == '\t' || text_[at] == '\n' || text_[at] == '\r')) {
      ++at;
    }
    return at;
  }

  // Where the token the lexer stopped in (which ends before `position`)
  // starts: after the last value, and after a ',' or ':' that precedes it.
  size_t token_start(size_t position) const {
    size_t at = skip_space(last_end_);
    if (at < text_.size() && (text_[at] == ',' || text_[at] == ':') && at + 1 < position) {
      at = skip_space(at + 1);
    }
    return std::min(at, text_.size());
  }

  // The opening quote of the string that ends at `end`: the last '"' before
  // its closing one that no backslash escapes.
  size_t string_start(size_t end) const {
    size_t at = end - 1;
    while (at > 0) {
      --at;
      if (text_[at] != '"') continue;
      size_t backslashes = 0;
      while (at > backslashes && text_[at - backslashes - 1] == '\\') ++backslashes;
      if (backslashes % 2 == 0) return at;
    }
    return at;
  }

  // The first byte of the UTF-8 sequence that the byte at `bad` breaks.
  size_t utf8_start(size_t bad) const {
    size_t at = bad;
    while (at > 0 && bad - at < 3 && (static_cast<unsigned char>(text_[at - 1]) & 0xC0) == 0x80) {
      --at;
    }
    if (at == 0) return bad;
    const auto lead = static_cast<unsigned char>(text_[at - 1]);
    const size_t length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC2 ? 2 : 0;
    return length > 0 && at - 1 + length > bad ? at - 1 : bad;
  }

  // Is text_[at..] a \u escape of a high surrogate (D800..DBFF)?
  bool high_surrogate_at(size_t at) const {
    if (at + 6 > text_.size() || text_[at] != '\\' || text_[at + 1] != 'u') return false;
    const std::string_view hex = text_.substr(at + 2, 4);
    if (!std::all_of(hex.begin(), hex.end(), is_hex)) return false;
    const unsigned long cp = std::stoul(std::string(hex), nullptr, 16);
    return cp >= 0xD800 && cp <= 0xDBFF;
  }

  // nlohmann stops after the character that follows the high surrogate
  // (`\uD800x`), after a backslash and another character (`\uD800\n`), or
  // after a second escape that is not a low surrogate (`\uD800\u0041`).
  size_t high_surrogate_start(size_t position) const {
    if (position >= 12 && text_[position - 6] == '\\' && high_surrogate_at(position - 12)) {
      return position - 12;
    }
    if (position >= 8 && text_[position - 2] == '\\' && high_surrogate_at(position - 8)) {
      return position - 8;
    }
    if (position >= 7 && high_surrogate_at(position - 7)) return position - 7;
    return position - 1;
  }

  [[noreturn]] void fail_expecting(size_t at, std::string_view what) const {
    if (at >= text_.size()) fail_at(at, format("the text ends where {} was expected", what));
    fail_at(at, format("expected {}", what));
  }

  // nlohmann's message: "... syntax error while parsing CONTEXT - DETAIL",
  // DETAIL either "unexpected TOKEN[; expected ...]" or the lexer's error.
  [[noreturn]] void describe_error(size_t position, const nlohmann::json::exception& e) const {
    const size_t start = token_start(position);
    if (e.id == 406) fail_at(start, "number out of range");  // 1e400
    const std::string_view what = e.what();
    constexpr std::string_view kWhile = "while parsing ";
    const size_t context_at = what.find(kWhile);
    const size_t detail_at = what.find(" - ", context_at);
    if (context_at == std::string_view::npos || detail_at == std::string_view::npos) {
      fail_at(position > 0 ? position - 1 : 0, what);
    }
    const std::string_view context =
        what.substr(context_at + kWhile.size(), detail_at - context_at - kWhile.size());
    const std::string_view detail = what.substr(detail_at + 3);
    const bool lexer_error = !detail.starts_with("unexpected ");
    const bool at_end = start >= text_.size();

    if (stack_.empty() && context == "value" && detail.ends_with("expected end of input")) {
      fail_at(start, "unexpected text after the JSON value");
    }
    if (context == "object separator") fail_expecting(start, "':' after an object key");
    if (context == "object") fail_expecting(start, "',' or '}' in an object");
    if (context == "array") fail_expecting(start, "',' or ']' in an array");
    const bool bad_string = lexer_error && !at_end && text_[start] == '"';
    if (context == "object key" && !bad_string) {
      fail_at(start, at_end ? "the text ends inside an object" : "expected a string key");
    }
    if (!lexer_error) {
      if (at_end) fail_at(start, "the text ends where a value was expected");
      fail_at(start,
              format("unexpected {} where a value was expected", describe_byte(text_[start])));
    }
    describe_lexer_error(position, start, detail);
  }

  [[noreturn]] void describe_lexer_error(size_t position, size_t start,
                                         std::string_view detail) const {
    // The lexer stops after the character it could not take.
    const size_t bad = position - 1;
    const bool at_end = bad >= text_.size();
    if (detail.starts_with("invalid string: control character")) {
      fail_at(bad, "unescaped control character in a string");
    }
    if (detail.starts_with("invalid string: ill-formed UTF-8")) {
      fail_at(utf8_start(bad), "invalid UTF-8 in a string");
    }
    if (detail.starts_with("invalid string: missing closing quote") ||
        (detail.starts_with("invalid string: forbidden character after backslash") && at_end)) {
      fail_at(bad, "the text ends inside a string");
    }
    if (detail.starts_with("invalid string: forbidden character after backslash")) {
      const auto c = static_cast<unsigned char>(text_[bad]);
      if (c > 0x20 && c < 0x7f)
        fail_at(bad, format("invalid escape '\\{}' in a string", text_[bad]));
      fail_at(bad, format("invalid escape in a string: {} after '\\'", describe_byte(text_[bad])));
    }
    if (detail.starts_with("invalid string: '\\u' must be followed by 4 hex digits")) {
      fail_at(bad,
              at_end ? "the text ends inside a \\u escape" : "expected 4 hex digits after \\u");
    }
    if (detail.starts_with("invalid string: surrogate U+DC00..U+DFFF must follow")) {
      fail_at(position - 6, "unpaired low surrogate in \\u escape");
    }
    if (detail.starts_with("invalid string: surrogate U+D800..U+DBFF must be followed")) {
      fail_at(high_surrogate_start(position),
              "high surrogate in \\u escape without its low surrogate");
    }
    if (detail.starts_with("invalid number; expected digit after '-'")) {
      fail_at(bad, "expected a digit");
    }
    if (detail.starts_with("invalid number; expected digit after '.'")) {
      fail_at(bad, "expected a digit after the decimal point");
    }
    if (detail.starts_with("invalid number; expected digit after exponent sign") ||
        detail.starts_with("invalid number; expected '+', '-', or digit after exponent")) {
      fail_at(bad, "expected a digit in the exponent");
    }
    if (detail.starts_with("invalid literal") && start < text_.size()) {
      for (std::string_view word : {"true", "false", "null"}) {
        if (text_[start] == word[0]) fail_at(start, format("expected '{}'", word));
      }
      fail_at(start,
              format("unexpected {} where a value was expected", describe_byte(text_[start])));
    }
    fail_at(std::min(bad, text_.size()), detail.substr(0, detail.find("; last read:")));
  }

  std::string_view text_;
  std::string_view source_;
  const char* const* read_to_;
  std::vector<Frame> stack_;
  Json root_;
  // Where the last value, key or bracket ended.
  size_t last_end_ = 0;
};

}  // namespace

Json parse_json(std::string_view text, std::string_view source) {
  const char* read_to = text.data();
  JsonBuilder builder(text, source, &read_to);
  // nlohmann skips a byte order mark; JSON text never starts with one.
  if (!text.empty() && static_cast<unsigned char>(text[0]) == 0xEF) {
    throw JsonError(format("{}: invalid JSON at byte 0: unexpected byte 0xef where a value was "
                           "expected",
                           source),
                    0);
  }
  const TrackedChars first(text.data(), &read_to);
  const TrackedChars last(text.data() + text.size(), &read_to);
  nlohmann::json::sax_parse(first, last, &builder, nlohmann::json::input_format_t::json,
                            /*strict=*/true, /*ignore_comments=*/false);
  builder.check_consumed_all();
  return builder.take();
}

}  // namespace weft::io
