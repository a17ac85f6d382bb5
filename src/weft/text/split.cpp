#include "weft/text/split.h"

#include <algorithm>

#include "weft/core/error.h"
#include "weft/text/regex.h"
#include "weft/text/unicode.h"

namespace weft::text {

SplitBehavior split_behavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::removed;
  if (name == "Isolated") return SplitBehavior::isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
  if (name == "MergedWithNext") return SplitBehavior::merged_with_next;
  if (name == "Contiguous") return SplitBehavior::contiguous;
  WEFT_FAIL(
      "the split behavior '{}' is not one weft knows (Removed, Isolated, MergedWithPrevious, "
      "MergedWithNext, Contiguous)",
      name);
}

namespace {

template <typename Matches>
std::vector<Segment> from_matches(const Matches& matches, size_t size) {
  std::vector<Segment> out;
  if (size == 0) return {{0, 0, false}};
  size_t prev = 0;
  for (const auto& [b, e] : matches) {
    if (prev != b) out.push_back({prev, b, false});
    out.push_back({b, e, true});
    prev = e;
  }
  if (prev != size) out.push_back({prev, size, false});
  return out;
}

}  // namespace

std::vector<Segment> regex_segments(const Regex& re, std::string_view s) {
  return from_matches(re.find_all(s), s.size());
}

std::vector<Segment> char_segments(const std::function<bool(char32_t)>& pred, std::string_view s) {
  std::vector<Segment> out;
  if (s.empty()) return {{0, 0, false}};
  size_t last = 0, i = 0;
  while (i < s.size()) {
    size_t len = 0;
    const char32_t c = next_char(s, i, len);
    if (pred(c)) {
      if (last < i) out.push_back({last, i, false});
      out.push_back({i, i + len, true});
      last = i + len;
    }
    i += len;
  }
  if (s.size() > last) out.push_back({last, s.size(), false});
  return out;
}

std::vector<Segment> string_segments(std::string_view needle, std::string_view s) {
  std::vector<std::pair<size_t, size_t>> matches;
  size_t pos = 0;
  while ((pos = s.find(needle, pos)) != std::string_view::npos) {
    matches.emplace_back(pos, pos + needle.size());
    pos += needle.size();
  }
  return from_matches(matches, s.size());
}

void split_piece(const Piece& piece, std::vector<Segment> segs, SplitBehavior behavior, bool invert,
                 const PieceSink& out) {
  if (invert)
    for (auto& s : segs) s.match = !s.match;
  // (begin, end, remove)
  struct Part {
    size_t begin, end;
    bool remove;
  };
  std::vector<Part> parts;
  parts.reserve(segs.size());
  switch (behavior) {
    case SplitBehavior::isolated:
      for (const auto& s : segs) parts.push_back({s.begin, s.end, false});
      break;
    case SplitBehavior::removed:
      for (const auto& s : segs) parts.push_back({s.begin, s.end, s.match});
      break;
    case SplitBehavior::contiguous: {
      bool prev = false;
      for (const auto& s : segs) {
        if (s.match == prev && !parts.empty())
          parts.back().end = s.end;
        else
          parts.push_back({s.begin, s.end, false});
        prev = s.match;
      }
      break;
    }
    case SplitBehavior::merged_with_previous: {
      bool prev = false;
      for (const auto& s : segs) {
        if (s.match && !prev && !parts.empty())
          parts.back().end = s.end;
        else
          parts.push_back({s.begin, s.end, false});
        prev = s.match;
      }
      break;
    }
    case SplitBehavior::merged_with_next: {
      bool prev = false;
      for (size_t k = segs.size(); k-- > 0;) {
        const auto& s = segs[k];
        if (s.match && !prev && !parts.empty())
          parts.back().begin = s.begin;
        else
          parts.push_back({s.begin, s.end, false});
        prev = s.match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
    }
  }
  for (const auto& p : parts) {
    if (p.remove || p.begin == p.end) continue;
    out(Piece{piece.text.substr(p.begin, p.end - p.begin), piece.at_origin && p.begin == 0});
  }
}

}  // namespace weft::text
