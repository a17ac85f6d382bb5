// Splitting a string at the matches of a pattern, with the behaviors of
// Hugging Face's SplitDelimiterBehavior (NormalizedString::split), and the
// pieces the pre-tokenizers pass along.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weft::text {

class Regex;

enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };
// "Removed", "Isolated", … as tokenizer.json spells them; anything else is a
// weft::Error naming it.
SplitBehavior split_behavior(const std::string& name);

// A pre-token: its text, and whether it starts at the very beginning of the
// input (Metaspace's prepend_scheme "first" asks).
struct Piece {
  std::string text;
  bool at_origin = false;
};

// [begin, end) segments covering the string, each a match or not.
struct Segment {
  size_t begin, end;
  bool match;
};

std::vector<Segment> regex_segments(const Regex& re, std::string_view s);
// Every character c with pred(c) is a match of its own.
std::vector<Segment> char_segments(const std::function<bool(char32_t)>& pred, std::string_view s);
// Every occurrence of `needle` (non-empty) is a match.
std::vector<Segment> string_segments(std::string_view needle, std::string_view s);

// Splits `piece` by `segments` (match flags inverted first when `invert`) with
// `behavior`, appending the non-empty parts to `out`.
void split_piece(const Piece& piece, std::vector<Segment> segments, SplitBehavior behavior,
                 bool invert, std::vector<Piece>& out);

}  // namespace weft::text
