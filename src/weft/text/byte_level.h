// GPT-2's byte-to-character table (bytes_to_unicode): every byte is shown as
// a printable character, so byte-level BPE vocabularies are text.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace weft::text {

// byte -> its character, UTF-8 encoded.
const std::array<std::string, 256>& byte_chars();
// The byte a character (code point) stands for, or -1.
int char_byte(char32_t c);
// Every byte of `s` as its character.
void append_byte_chars(std::string& out, std::string_view s);

}  // namespace weft::text
