// Regular expressions of tokenizer.json (Split, Replace), through PCRE2 with
// UTF and Unicode properties (PCRE2_UTF | PCRE2_UCP), JIT-compiled.
//
// Hugging Face's tokenizers runs these through Oniguruma, whose \s is
// Unicode's White_Space; PCRE2's leaves out U+0085 (NEL). Patterns are
// rewritten so that \s and \S outside a class, and \s inside one, mean
// White_Space exactly.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weft::text {

class Regex {
 public:
  // A pattern PCRE2 rejects is a weft::Error naming it and PCRE2's reason.
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  const std::string& pattern() const { return pattern_; }
  // The matches of the pattern in `s`, left to right, as Oniguruma's find_iter
  // gives them: an empty match right where the previous match ended is
  // skipped. Thread-safe.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const;

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8
  bool jit_ = false;
};

// `pattern` with \s, \S rewritten as described above (exposed for tests).
std::string onig_compatible(const std::string& pattern);

}  // namespace weft::text
