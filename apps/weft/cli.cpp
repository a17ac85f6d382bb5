#include "cli.h"

#include <algorithm>
#include <charconv>
#include <iostream>
#include <sstream>

#include "weft/core/error.h"

namespace weft::cli {

namespace {
std::vector<Command>& registry() {
  static std::vector<Command> list;
  return list;
}
}  // namespace

Register::Register(std::string name, std::string summary, OptionsFn options, CommandFn run) {
  registry().push_back({std::move(name), std::move(summary), std::move(options), std::move(run)});
}

const std::vector<Command>& commands() {
  auto& list = registry();
  std::sort(list.begin(), list.end(),
            [](const Command& a, const Command& b) { return a.name < b.name; });
  return list;
}

const Command* find_command(const std::vector<std::string>& args, size_t& words) {
  const Command* command = nullptr;
  words = 0;
  for (const auto& c : commands()) {
    std::vector<std::string> parts;
    for (size_t start = 0, sp; start <= c.name.size(); start = sp + 1) {
      sp = c.name.find(' ', start);
      if (sp == std::string::npos) sp = c.name.size();
      parts.push_back(c.name.substr(start, sp - start));
    }
    if (parts.size() > args.size() || parts.size() <= words) continue;
    if (std::equal(parts.begin(), parts.end(), args.begin())) {
      command = &c;
      words = parts.size();
    }
  }
  return command;
}

Options::Options(std::string usage, std::string about)
    : usage_(std::move(usage)), about_(std::move(about)) {}

Options& Options::flag(const std::string& name, const std::string& help) {
  specs_.push_back({name, "", "", help, true});
  return *this;
}

Options& Options::option(const std::string& name, const std::string& metavar,
                         const std::string& fallback, const std::string& help) {
  specs_.push_back({name, metavar, fallback, help, false});
  return *this;
}

Options& Options::positional(const std::string& name, const std::string& help) {
  positional_specs_.emplace_back(name, help);
  return *this;
}

const Options::Spec& Options::spec(const std::string& name) const {
  for (const Spec& s : specs_)
    if (s.name == name) return s;
  WEFT_FAIL("internal: option --{} was never declared", name);
}

void Options::parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << help();
      throw HelpShown{};
    }
    if (!a.starts_with("--")) {
      positional_values_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    auto it =
        std::find_if(specs_.begin(), specs_.end(), [&](const Spec& s) { return s.name == name; });
    WEFT_CHECK(it != specs_.end(), "unknown option --{}; see `{} --help`", name,
               usage_.substr(0, usage_.find(" [")));
    if (it->is_flag) {
      WEFT_CHECK(!inline_value, "--{} is a switch and takes no value", name);
      values_[name] = "1";
      continue;
    }
    if (!inline_value) {
      WEFT_CHECK(i + 1 < args.size(), "--{} needs a value ({})", name, it->metavar);
      value = args[++i];
    }
    values_[name] = value;
  }
  WEFT_CHECK(positional_values_.size() <= positional_specs_.size(),
             "unexpected argument '{}'; see --help",
             positional_values_.empty() ? std::string() : positional_values_.back());
}

std::vector<std::string> Options::names() const {
  std::vector<std::string> out;
  for (const Spec& s : specs_) out.push_back(s.name);
  return out;
}

bool Options::flag_set(const std::string& name) const {
  spec(name);
  return values_.count(name) > 0;
}

bool Options::given(const std::string& name) const {
  spec(name);
  return values_.count(name) > 0;
}

const std::string& Options::str(const std::string& name) const {
  const Spec& s = spec(name);
  auto it = values_.find(name);
  return it == values_.end() ? s.fallback : it->second;
}

int64_t Options::integer(const std::string& name) const {
  const std::string& v = str(name);
  int64_t out = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  WEFT_CHECK(ec == std::errc() && end == v.data() + v.size(), "--{} expects an integer, got '{}'",
             name, v);
  return out;
}

double Options::number(const std::string& name) const {
  const std::string& v = str(name);
  try {
    size_t used = 0;
    double out = std::stod(v, &used);
    if (used == v.size()) return out;
  } catch (const std::exception&) {
  }
  WEFT_FAIL("--{} expects a number, got '{}'", name, v);
}

int64_t parse_bytes(const std::string& text, const std::string& what) {
  int64_t n = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, n);
  int64_t scale = 1;
  if (ec == std::errc() && p + 1 == end) {
    switch (*p) {
      case 'K':
      case 'k':
        scale = int64_t{1} << 10;
        ++p;
        break;
      case 'M':
      case 'm':
        scale = int64_t{1} << 20;
        ++p;
        break;
      case 'G':
      case 'g':
        scale = int64_t{1} << 30;
        ++p;
        break;
      default: break;
    }
  }
  WEFT_CHECK(ec == std::errc() && p == end && n >= 0,
             "{} expects a byte count like 1024, 1K, 64M or 1G, got '{}'", what, text);
  WEFT_CHECK(n <= INT64_MAX / scale, "{} of {} is too large (at most {} bytes)", what, text,
             INT64_MAX);
  return n * scale;
}

std::vector<int32_t> parse_token_ids(const std::string& text) {
  std::vector<int32_t> ids;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    if (*p == ',' || *p == ' ') {
      ++p;
      continue;
    }
    int32_t id = 0;
    auto [next, ec] = std::from_chars(p, end, id);
    WEFT_CHECK(ec == std::errc() && (next == end || *next == ',' || *next == ' '),
               "--prompt-ids expects token ids separated by commas, like 464,2068; got '{}'", text);
    ids.push_back(id);
    p = next;
  }
  return ids;
}

int64_t Options::bytes(const std::string& name) const {
  return parse_bytes(str(name), "--" + name);
}

const std::string& Options::choice(const std::string& name,
                                   const std::vector<std::string>& choices) const {
  const std::string& v = str(name);
  if (std::find(choices.begin(), choices.end(), v) != choices.end()) return v;
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
  WEFT_FAIL("--{} must be one of {}; got '{}'", name, list, v);
}

std::string Options::help() const {
  std::ostringstream out;
  out << "usage: " << usage_ << "\n\n" << about_ << "\n";
  if (!positional_specs_.empty()) {
    out << "\narguments:\n";
    for (const auto& [name, text] : positional_specs_) {
      out << "  " << name << std::string(name.size() < 26 ? 26 - name.size() : 1, ' ') << text
          << "\n";
    }
  }
  out << "\noptions:\n";
  auto line = [&](const std::string& left, const std::string& text) {
    out << "  " << left << std::string(left.size() < 26 ? 26 - left.size() : 1, ' ') << text
        << "\n";
  };
  for (const Spec& s : specs_) {
    std::string left = "--" + s.name + (s.is_flag ? "" : " " + s.metavar);
    std::string text = s.help;
    if (!s.is_flag && !s.fallback.empty()) text += " (default: " + s.fallback + ")";
    line(left, text);
  }
  line("-h, --help", "show this help and exit");
  return out.str();
}

}  // namespace weft::cli
