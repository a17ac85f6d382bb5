// UTF-8 and the Unicode character properties the tokenizer pipeline needs,
// with the meanings Hugging Face's tokenizers (Rust) gives them: Rust's
// char::is_whitespace (White_Space), is_alphanumeric (Alphabetic or a Number
// category), is_numeric (Nd, Nl, No), the regex crate's \w, and Unicode
// normalization forms and lowercasing through ICU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace weft::text {

// The code point at s[i] and its length in bytes; s must be valid UTF-8.
inline char32_t next_char(std::string_view s, size_t i, size_t& len) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) {
    len = 1;
    return b;
  }
  if (b < 0xE0) {
    len = 2;
    return (char32_t(b & 0x1F) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3F);
  }
  if (b < 0xF0) {
    len = 3;
    return (char32_t(b & 0x0F) << 12) |
           (char32_t(static_cast<unsigned char>(s[i + 1]) & 0x3F) << 6) |
           (static_cast<unsigned char>(s[i + 2]) & 0x3F);
  }
  len = 4;
  return (char32_t(b & 0x07) << 18) |
         (char32_t(static_cast<unsigned char>(s[i + 1]) & 0x3F) << 12) |
         (char32_t(static_cast<unsigned char>(s[i + 2]) & 0x3F) << 6) |
         (static_cast<unsigned char>(s[i + 3]) & 0x3F);
}
// Length in bytes of the UTF-8 sequence that starts with byte b (1 for a
// continuation byte, which valid text never starts a character with).
inline size_t char_len(unsigned char b) { return b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }

void append_utf8(std::string& out, char32_t c);

// The offset of the first byte that is not part of valid UTF-8 (overlong
// forms, surrogates and code points above U+10FFFF are invalid), or npos.
size_t invalid_utf8_offset(std::string_view s);
// Rust's String::from_utf8_lossy: each maximal invalid subsequence becomes
// U+FFFD.
std::string utf8_lossy(std::string_view bytes);

bool is_whitespace(char32_t c);    // White_Space
bool is_alphanumeric(char32_t c);  // Alphabetic or Nd/Nl/No
bool is_numeric(char32_t c);       // Nd, Nl, No
bool is_punctuation(char32_t c);   // ASCII punctuation or Pc/Pd/Ps/Pe/Pi/Pf/Po
bool is_word(char32_t c);          // the regex crate's \w: Alphabetic, M, Nd, Pc, Join_Control

enum class NormalForm { nfc, nfd, nfkc, nfkd };
std::string normalize(std::string_view s, NormalForm form);
// Each character through its full lowercase mapping, one character at a time
// (Rust's char::to_lowercase: no context, so no final sigma).
std::string lowercase(std::string_view s);

}  // namespace weft::text
