// Reading tokenizer.json fields: a missing or mistyped field is a weft::Error
// naming the component and the field (text/ only).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "weft/core/error.h"

namespace weft::text::detail {

inline const nlohmann::json& field(const nlohmann::json& j, const char* key,
                                   const std::string& what) {
  WEFT_CHECK(j.is_object() && j.contains(key), "tokenizer.json: {} has no \"{}\"", what, key);
  return j.at(key);
}

template <typename T>
T get(const nlohmann::json& j, const char* key, const std::string& what) {
  const nlohmann::json& v = field(j, key, what);
  try {
    return v.get<T>();
  } catch (const nlohmann::json::exception&) {
    WEFT_FAIL("tokenizer.json: {} has \"{}\" of the wrong type ({})", what, key, v.type_name());
  }
}

template <typename T>
T get_or(const nlohmann::json& j, const char* key, T fallback, const std::string& what) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return fallback;
  return get<T>(j, key, what);
}

inline std::string type_of(const nlohmann::json& j, const std::string& what) {
  WEFT_CHECK(j.is_object(), "tokenizer.json: {} is a {}, not an object", what, j.type_name());
  return get<std::string>(j, "type", what);
}

// A {"String": s} or {"Regex": r} pattern: (is_regex, text).
inline std::pair<bool, std::string> pattern(const nlohmann::json& j, const std::string& what) {
  const nlohmann::json& p = field(j, "pattern", what);
  if (p.is_object() && p.contains("Regex"))
    return {true, get<std::string>(p, "Regex", what + " pattern")};
  if (p.is_object() && p.contains("String"))
    return {false, get<std::string>(p, "String", what + " pattern")};
  WEFT_FAIL(
      "tokenizer.json: {} has a pattern that is neither {{\"String\": …}} nor {{\"Regex\": …}}",
      what);
}

}  // namespace weft::text::detail
