#include "weft/text/added_tokens.h"

#include "weft/text/json_util.h"
#include "weft/text/unicode.h"

namespace weft::text {

std::vector<AddedToken> parse_added_tokens(const nlohmann::json& spec) {
  std::vector<AddedToken> out;
  if (spec.is_null()) return out;
  WEFT_CHECK(spec.is_array(), "tokenizer.json: \"added_tokens\" is not a list");
  for (const auto& t : spec) {
    const std::string what = "an added token";
    AddedToken a;
    const auto id = detail::get<int64_t>(t, "id", what);
    WEFT_CHECK(id >= 0 && id < (int64_t{1} << 26), "tokenizer.json: an added token has the id {}",
               id);
    a.id = static_cast<int32_t>(id);
    a.content = detail::get<std::string>(t, "content", what);
    WEFT_CHECK(invalid_utf8_offset(a.content) == std::string::npos,
               "tokenizer.json: an added token is not UTF-8");
    a.single_word = detail::get_or<bool>(t, "single_word", false, what);
    a.lstrip = detail::get_or<bool>(t, "lstrip", false, what);
    a.rstrip = detail::get_or<bool>(t, "rstrip", false, what);
    a.special = detail::get_or<bool>(t, "special", false, what);
    a.normalized = detail::get_or<bool>(t, "normalized", !a.special, what);
    out.push_back(std::move(a));
  }
  return out;
}

AddedMatcher::AddedMatcher(std::vector<AddedToken> tokens, std::vector<std::string> patterns)
    : tokens_(std::move(tokens)), patterns_(std::move(patterns)), by_first_byte_(256) {
  for (size_t k = 0; k < patterns_.size(); ++k)
    if (!patterns_[k].empty())
      by_first_byte_[static_cast<unsigned char>(patterns_[k][0])].push_back(
          static_cast<uint32_t>(k));
}

namespace {

char32_t last_char(std::string_view s) {
  size_t start = s.size() - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  size_t len = 0;
  return next_char(s, start, len);
}

}  // namespace

std::vector<Chunk> AddedMatcher::split(std::string_view s) const {
  std::vector<Chunk> out;
  size_t start_offset = 0;
  size_t i = 0;
  while (i < s.size()) {
    // The longest token that starts at i.
    int best = -1;
    size_t best_len = 0;
    for (const uint32_t k : by_first_byte_[static_cast<unsigned char>(s[i])]) {
      const std::string& p = patterns_[k];
      if (p.size() > best_len && s.substr(i, p.size()) == p) {
        best = static_cast<int>(k);
        best_len = p.size();
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    const AddedToken& t = tokens_[static_cast<size_t>(best)];
    size_t start = i, stop = i + best_len;
    i = stop;  // the next search starts after this match, used or not
    if (t.single_word) {
      const bool start_space = start == 0 || !is_word(last_char(s.substr(0, start)));
      size_t len = 0;
      const bool stop_space = stop == s.size() || !is_word(next_char(s, stop, len));
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) {
      size_t b = start;
      while (b > 0) {
        size_t p = b - 1;
        while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
        size_t len = 0;
        if (!is_whitespace(next_char(s, p, len))) break;
        b = p;
      }
      start = std::max(b, start_offset);
    }
    if (t.rstrip) {
      while (stop < s.size()) {
        size_t len = 0;
        if (!is_whitespace(next_char(s, stop, len))) break;
        stop += len;
      }
    }
    if (start > start_offset) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, t.id});
    start_offset = stop;
  }
  if (start_offset < s.size()) out.push_back({start_offset, s.size(), -1});
  return out;
}

}  // namespace weft::text
