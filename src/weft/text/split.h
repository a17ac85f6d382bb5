// Splitting a string at the matches of a pattern, with the behaviors of
// Hugging Face's SplitDelimiterBehavior (NormalizedString::split), and the
// pieces the pre-tokenizers pass along.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
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

// Where pre-tokenizers send their pieces, one at a time (a reference to a
// callable that outlives the call; no allocation).
class PieceSink {
 public:
  template <typename F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, PieceSink>) explicit PieceSink(F& f)
      : ctx_(&f), fn_([](void* c, Piece&& p) { (*static_cast<F*>(c))(std::move(p)); }) {}
  void operator()(Piece&& p) const { fn_(ctx_, std::move(p)); }

 private:
  void* ctx_;
  void (*fn_)(void*, Piece&&);
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
// `behavior`, sending the non-empty parts to `out` in order.
void split_piece(const Piece& piece, std::vector<Segment> segments, SplitBehavior behavior,
                 bool invert, const PieceSink& out);

}  // namespace weft::text
