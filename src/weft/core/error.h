// Errors: WEFT_CHECK(cond, "message with {}", values) throws weft::Error.
//
// The message is what a user reads: say what was wrong and what to do. The
// file and line are kept apart (where()) so the CLI can print the message
// alone and exit with status 2.
#pragma once

#include <fmt/core.h>

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

// Formats with fmt, the format string checked against the arguments at
// compile time: "{}" for any value, "{:.4f}" and the rest of fmt's syntax.
// A std::vector prints as "[1,2,3]" (rank lists in messages and JSON).
template <typename... Args>
std::string format(fmt::format_string<Args...> fmt, Args&&... args) {
  return fmt::format(fmt, std::forward<Args>(args)...);
}

[[noreturn]] void throw_error(const char* file, int line, std::string message);

}  // namespace weft

namespace weft {
// A formatter for types with a str() method (Shape, Device): "{}" prints
// str(). (Only fmt/core.h here: it keeps this header light.)
template <typename T>
struct StrFormatter {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <typename Context>
  auto format(const T& value, Context& ctx) const {
    return fmt::format_to(ctx.out(), "{}", value.str());
  }
};
}  // namespace weft

template <typename T>
struct fmt::formatter<std::vector<T>> {
  constexpr auto parse(fmt::format_parse_context& ctx) { return ctx.begin(); }
  template <typename Context>
  auto format(const std::vector<T>& values, Context& ctx) const {
    auto out = fmt::format_to(ctx.out(), "[");
    for (size_t i = 0; i < values.size(); ++i) {
      out = i ? fmt::format_to(out, ",{}", values[i]) : fmt::format_to(out, "{}", values[i]);
    }
    return fmt::format_to(out, "]");
  }
};

#define WEFT_CHECK(cond, ...)                                               \
  do {                                                                      \
    if (!(cond)) [[unlikely]] {                                             \
      ::weft::throw_error(__FILE__, __LINE__, ::weft::format(__VA_ARGS__)); \
    }                                                                       \
  } while (0)

#define WEFT_FAIL(...) ::weft::throw_error(__FILE__, __LINE__, ::weft::format(__VA_ARGS__))
