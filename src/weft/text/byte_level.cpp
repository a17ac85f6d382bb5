#include "weft/text/byte_level.h"

#include "weft/text/unicode.h"

namespace weft::text {

namespace {

struct Tables {
  std::array<std::string, 256> to_char;
  std::array<int, 324> to_byte{};  // code points below 324 only
  Tables() {
    to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable =
          (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t c = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      append_utf8(to_char[static_cast<size_t>(b)], c);
      to_byte[c] = b;
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::array<std::string, 256>& byte_chars() { return tables().to_char; }

int char_byte(char32_t c) { return c < 324 ? tables().to_byte[c] : -1; }

void append_byte_chars(std::string& out, std::string_view s) {
  const auto& t = tables().to_char;
  for (const char b : s) out += t[static_cast<unsigned char>(b)];
}

}  // namespace weft::text
