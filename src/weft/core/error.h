// Errors: WEFT_CHECK(cond, "message with {}", values) throws weft::Error.
//
// The message is what a user reads: say what was wrong and what to do. The
// file and line are kept apart (where()) so the CLI can print the message
// alone and exit with status 2.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weft {

class Error : public std::runtime_error {
 public:
  Error(std::string message, std::string where = {})
      : std::runtime_error(std::move(message)), where_(std::move(where)) {}
  // "file.cpp:123", empty when unknown.
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

namespace detail {

template <typename T>
void put(std::ostringstream& out, const T& value) {
  out << value;
}

// A vector prints as "[1,2,3]": rank lists in messages and JSON.
template <typename T>
void put(std::ostringstream& out, const std::vector<T>& values) {
  out << '[';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out << ',';
    put(out, values[i]);
  }
  out << ']';
}

inline void format_into(std::ostringstream& out, std::string_view fmt) { out << fmt; }

template <typename T, typename... Rest>
void format_into(std::ostringstream& out, std::string_view fmt, const T& value,
                 const Rest&... rest) {
  size_t pos = fmt.find("{}");
  if (pos == std::string_view::npos) {
    out << fmt;
    return;
  }
  out << fmt.substr(0, pos);
  put(out, value);
  format_into(out, fmt.substr(pos + 2), rest...);
}

}  // namespace detail

// Replaces each "{}" in fmt with the next value, streamed with operator<<
// (a std::vector as "[a,b,c]").
template <typename... Args>
std::string format(std::string_view fmt, const Args&... args) {
  std::ostringstream out;
  detail::format_into(out, fmt, args...);
  return out.str();
}

[[noreturn]] void throw_error(const char* file, int line, std::string message);

}  // namespace weft

#define WEFT_CHECK(cond, ...)                                               \
  do {                                                                      \
    if (!(cond)) [[unlikely]] {                                             \
      ::weft::throw_error(__FILE__, __LINE__, ::weft::format(__VA_ARGS__)); \
    }                                                                       \
  } while (0)

#define WEFT_FAIL(...) ::weft::throw_error(__FILE__, __LINE__, ::weft::format(__VA_ARGS__))
