// Json: a small JSON value with a strict parser and a writer (RFC 8259), both
// nlohmann-json underneath (included only by json.cpp).
//
// Used for safetensors headers, checkpoint indexes, config files and --json
// output. Objects keep their keys in insertion order, so what is written is
// deterministic. The parser accepts exactly RFC 8259 and nothing more: no
// comments, no trailing commas, no NaN/Infinity, no duplicate object keys, no
// invalid UTF-8, nesting at most kMaxDepth deep. A parse error is a JsonError
// that carries the byte offset where the text went wrong.
//
// Numbers written without a fraction or exponent that fit in int64 stay
// integers (exact, as safetensors offsets must be); every other number is a
// double. The writer prints integers exactly and doubles in a short form that
// reads back to the same value (2.0 as "2.0", so it stays a double); it refuses
// NaN and Inf, which JSON cannot hold, and strings that are not valid UTF-8.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "weft/core/error.h"

namespace weft::io {

class JsonError : public Error {
 public:
  JsonError(std::string message, size_t offset) : Error(std::move(message)), offset_(offset) {}
  // Byte offset in the parsed text where the error was found.
  size_t offset() const { return offset_; }

 private:
  size_t offset_;
};

class Json {
 public:
  enum class Type { null, boolean, integer, number, string, array, object };
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;
  static constexpr int kMaxDepth = 128;

  Json() = default;
  Json(std::nullptr_t) {}
  Json(bool b) : value_(b) {}
  template <std::integral T>
  requires(!std::same_as<T, bool>) Json(T v) : value_(checked_int(v)) {}
  Json(double d) : value_(d) {}
  Json(float f) : value_(static_cast<double>(f)) {}
  Json(const char* s) : value_(std::string(s)) {}
  Json(std::string_view s) : value_(std::string(s)) {}
  Json(std::string s) : value_(std::move(s)) {}
  Json(Array a) : value_(std::move(a)) {}
  Json(Object o) : value_(std::move(o)) {}
  static Json array() { return Json(Array{}); }
  static Json object() { return Json(Object{}); }

  Type type() const { return static_cast<Type>(value_.index()); }
  bool is_null() const { return type() == Type::null; }
  bool is_bool() const { return type() == Type::boolean; }
  bool is_integer() const { return type() == Type::integer; }
  // Integers and doubles.
  bool is_number() const { return is_integer() || type() == Type::number; }
  bool is_string() const { return type() == Type::string; }
  bool is_array() const { return type() == Type::array; }
  bool is_object() const { return type() == Type::object; }

  // Typed access; the wrong type is a weft::Error naming both types.
  bool as_bool() const;
  int64_t as_int() const;    // integers only (no 2.0, no 1e3)
  double as_double() const;  // any number
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;
  Object& as_object();

  // Object lookup: find() returns nullptr when absent, at() throws naming the key.
  const Json* find(std::string_view key) const;
  const Json& at(std::string_view key) const;
  // Object member, inserted as null when absent; a null value becomes an object.
  Json& operator[](std::string_view key);
  // Array element (bounds checked).
  const Json& at(size_t index) const;
  // Appends to an array; a null value becomes an array.
  void push_back(Json v);
  // Elements of an array or members of an object.
  size_t size() const;

  // Compact (indent < 0: no spaces at all) or pretty with `indent` spaces.
  std::string dump(int indent = -1) const;

  friend bool operator==(const Json& a, const Json& b);

 private:
  template <std::integral T>
  static int64_t checked_int(T v) {
    if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(int64_t)) {
      WEFT_CHECK(v <= static_cast<T>(INT64_MAX), "integer {} does not fit in a JSON integer", v);
    }
    return static_cast<int64_t>(v);
  }

  std::variant<std::nullptr_t, bool, int64_t, double, std::string, Array, Object> value_;
};

// "null", "boolean", "integer", "number", "string", "array", "object".
std::string_view json_type_name(Json::Type t);

// Parses one JSON text (surrounding whitespace allowed). Errors are JsonError
// with the message "<source>: invalid JSON at byte N: <what>".
Json parse_json(std::string_view text, std::string_view source = "JSON text");

}  // namespace weft::io
