#define PCRE2_CODE_UNIT_WIDTH 8
#include "weft/text/regex.h"

#include <pcre2.h>

#include "weft/core/error.h"
#include "weft/text/unicode.h"

namespace weft::text {

namespace {

// White_Space, as the contents of a character class.
constexpr const char* kSpaceClass =
    "\\t\\n\\x0b\\f\\r\\x20\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}"
    "\\x{205f}\\x{3000}";

// Per-thread match data and JIT stack (a long run of one class can need more
// than PCRE2's 32 KiB default).
struct ThreadState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  ThreadState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~ThreadState() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
  ThreadState(const ThreadState&) = delete;
  ThreadState& operator=(const ThreadState&) = delete;
};

ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

std::string onig_compatible(const std::string& p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[i + 1];
      if (n == 's') {
        out += in_class ? std::string(kSpaceClass) : "[" + std::string(kSpaceClass) + "]";
      } else if (n == 'S' && !in_class) {
        out += "[^" + std::string(kSpaceClass) + "]";
      } else {
        out += c;
        out += n;
      }
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
      const size_t end = p.find(":]", i + 2);
      if (end != std::string::npos) {
        out.append(p, i, end + 2 - i);
        i = end + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

Regex::Regex(const std::string& pattern) : pattern_(pattern) {
  const std::string translated = onig_compatible(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                        PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  WEFT_CHECK(code_ != nullptr, "the regular expression '{}' does not compile: {} (at offset {})",
             pattern, pcre2_message(error), offset);
  jit_ = pcre2_jit_compile(static_cast<pcre2_code*>(code_), PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view s) const {
  std::vector<std::pair<size_t, size_t>> out;
  ThreadState& ts = thread_state();
  auto* code = static_cast<pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t start = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (start <= s.size()) {
    const int rc =
        jit_ ? pcre2_jit_match(code, subject, s.size(), start, 0, ts.data, ts.context)
             : pcre2_match(code, subject, s.size(), start, PCRE2_NO_UTF_CHECK, ts.data, ts.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    WEFT_CHECK(rc >= 0, "matching the regular expression '{}' failed: {}", pattern_,
               pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(ts.data);
    const size_t b = ov[0], e = ov[1];
    if (b == e && have_last && e == last_end) {
      if (start >= s.size()) break;
      start += char_len(static_cast<unsigned char>(s[start]));
      continue;
    }
    out.emplace_back(b, e);
    have_last = true;
    last_end = e;
    start = e;
  }
  return out;
}

}  // namespace weft::text
