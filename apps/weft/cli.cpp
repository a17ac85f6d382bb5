#include "cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <iostream>
#include <map>
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

Options& Options::repeated(const std::string& name, const std::string& metavar,
                           const std::string& help) {
  specs_.push_back({name, metavar, "", help, false, true});
  return *this;
}

Options& Options::positional_list(const std::string& name, const std::string& help) {
  positional(name, help);
  positional_list_ = true;
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

namespace {

// Edit distance (insertions, deletions, substitutions, adjacent swaps).
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string Options::did_you_mean(const std::string& name) const {
  std::string best;
  size_t best_distance = std::max<size_t>(1, name.size() / 3) + 1;
  for (const Spec& s : specs_) {
    const size_t d = edit_distance(name, s.name);
    const bool prefix = name.size() >= 3 && s.name.starts_with(name);
    if (d < best_distance || (prefix && best.empty())) {
      best = s.name;
      best_distance = prefix ? 0 : d;
    }
  }
  return best.empty() ? "" : format(" (did you mean --{}?)", best);
}

void Options::parse(const std::vector<std::string>& args) {
  // CLI11 does the parsing; weft keeps its own help text (defaults shown as
  // the options declare them) and its own error messages.
  CLI::App app{about_};
  app.set_help_flag();
  app.allow_extras(false);
  app.allow_windows_style_options(false);
  app.positionals_at_end(false);
  app.add_flag("-h,--help");
  std::map<std::string, std::string> values;
  std::map<std::string, int64_t> flags;
  std::map<std::string, std::vector<std::string>> lists;
  for (const Spec& s : specs_) {
    if (s.repeated) {
      app.add_option("--" + s.name, lists[s.name], s.help)
          ->type_name(s.metavar)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
          ->allow_extra_args(false);
    } else if (s.is_flag) {
      app.add_flag("--" + s.name, flags[s.name], s.help)->disable_flag_override();
    } else {
      app.add_option("--" + s.name, values[s.name], s.help)
          ->type_name(s.metavar)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
          ->allow_extra_args(false);
    }
  }
  std::vector<std::string> positionals;
  if (!positional_specs_.empty()) app.add_option("positionals", positionals);
  // "weft checkpoint export DIR OUT [...]" -> "weft checkpoint export".
  std::string command;
  std::istringstream words(usage_);
  for (std::string w; words >> w && std::islower(static_cast<unsigned char>(w[0]));) {
    command += (command.empty() ? "" : " ") + w;
  }
  auto declared = [&](const std::string& arg) -> const Spec* {
    if (!arg.starts_with("--")) return nullptr;
    const std::string name = arg.substr(2, arg.find('=') - 2);
    for (const Spec& s : specs_)
      if (s.name == name) return &s;
    return nullptr;
  };
  // What CLI11 would misread: an option whose value is missing because the
  // next word is another option (`--lr --steps 5`), and a switch given a value.
  for (size_t i = 0; i < args.size() && args[i] != "--"; ++i) {
    const Spec* s = declared(args[i]);
    if (!s) continue;
    const bool inline_value = args[i].find('=') != std::string::npos;
    WEFT_CHECK(!s->is_flag || !inline_value, "--{} is a switch and takes no value", s->name);
    WEFT_CHECK(s->is_flag || inline_value ||
                   (i + 1 < args.size() && !declared(args[i + 1]) && args[i + 1] != "--help"),
               "--{} needs a value ({})", s->name, s->metavar);
  }
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ExtrasError&) {
    for (const std::string& a : args) {
      if (a == "--") break;
      if (a.size() > 1 && a.starts_with("-") && !declared(a) && a != "-h" && a != "--help") {
        const std::string name = a.substr(a.starts_with("--") ? 2 : 1);
        WEFT_FAIL("unknown option {}; see `{} --help`{}", a.substr(0, a.find('=')), command,
                  did_you_mean(name.substr(0, name.find('='))));
      }
    }
    WEFT_FAIL("unexpected argument '{}'; see `{} --help`", app.remaining().back(), command);
  } catch (const CLI::ParseError& e) {
    WEFT_FAIL("{}; see `{} --help`", e.what(), command);
  }
  WEFT_CHECK(positional_list_ || positionals.size() <= positional_specs_.size(),
             "unexpected argument '{}'; see `{} --help`",
             positionals.empty() ? std::string() : positionals.back(), command);
  if (flags["help"] > 0 || app.count("--help") > 0) {
    std::cout << help();
    throw HelpShown{};
  }
  for (const Spec& s : specs_) {
    if (s.repeated) {
      if (!lists[s.name].empty()) {
        lists_[s.name] = lists[s.name];
        values_[s.name] = lists[s.name].back();
      }
    } else if (s.is_flag) {
      if (flags[s.name] > 0) values_[s.name] = "1";
    } else if (app.count("--" + s.name) > 0) {
      values_[s.name] = values[s.name];
    }
  }
  positional_values_ = positionals;
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

std::vector<std::string> Options::all(const std::string& name) const {
  spec(name);
  auto it = lists_.find(name);
  return it == lists_.end() ? std::vector<std::string>{} : it->second;
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
    if (s.repeated) text += " (may be repeated)";
    line(left, text);
  }
  line("-h, --help", "show this help and exit");
  return out.str();
}

}  // namespace weft::cli
