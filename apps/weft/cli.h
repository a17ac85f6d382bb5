// The `weft` command line: a registry of subcommands and their options,
// parsed with CLI11 (missing values, unknown options with a did-you-mean,
// switches given values are errors that say so); --help text is written from
// the options each command declares.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace weft::cli {

// Thrown by Options::parse when --help was given: the help text was printed
// and the command should exit with status 0.
struct HelpShown {};

class Options {
 public:
  // usage: "weft bench gemm [options]"; about: a paragraph under it.
  Options(std::string usage, std::string about);

  // A boolean switch (--name).
  Options& flag(const std::string& name, const std::string& help);
  // An option with a value (--name VALUE or --name=VALUE) and its default.
  Options& option(const std::string& name, const std::string& metavar, const std::string& fallback,
                  const std::string& help);
  // An option that may be given several times (--name A --name B), no default.
  Options& repeated(const std::string& name, const std::string& metavar, const std::string& help);
  // Positional arguments, named in the usage line.
  Options& positional(const std::string& name, const std::string& help);
  // Any number of positional arguments after the named ones ("FILE…").
  Options& positional_list(const std::string& name, const std::string& help);

  // Throws weft::Error for unknown options or missing values; prints help and
  // throws HelpShown for --help / -h.
  void parse(const std::vector<std::string>& args);

  bool flag_set(const std::string& name) const;
  // Whether the user gave the option (as opposed to its default applying).
  bool given(const std::string& name) const;
  const std::string& str(const std::string& name) const;
  // Every value of a repeated option, in the order given (str: the last).
  std::vector<std::string> all(const std::string& name) const;
  int64_t integer(const std::string& name) const;
  double number(const std::string& name) const;
  // A byte count: 1024, 1K, 64M, 2G (powers of 1024, as nccl-tests).
  int64_t bytes(const std::string& name) const;
  // One of `choices`, else a clear error.
  const std::string& choice(const std::string& name, const std::vector<std::string>& choices) const;
  const std::vector<std::string>& positionals() const { return positional_values_; }
  // The names of the declared options and switches, in declaration order.
  std::vector<std::string> names() const;

  std::string help() const;

 private:
  // " (did you mean --steps?)" for the declared option closest to `name`,
  // "" when none is close.
  std::string did_you_mean(const std::string& name) const;
  struct Spec {
    std::string name, metavar, fallback, help;
    bool is_flag = false;
    bool repeated = false;
  };
  const Spec& spec(const std::string& name) const;

  std::string usage_, about_;
  std::vector<Spec> specs_;
  std::vector<std::pair<std::string, std::string>> positional_specs_;
  bool positional_list_ = false;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> lists_;  // repeated options
  std::vector<std::string> positional_values_;
};

int64_t parse_bytes(const std::string& text, const std::string& what);
// Token ids separated by commas or spaces ("464,2068"), as --prompt-ids takes them.
std::vector<int32_t> parse_token_ids(const std::string& text);

using CommandFn = std::function<int(const std::vector<std::string>& args)>;
using OptionsFn = std::function<Options()>;

struct Command {
  std::string name;  // "train", "bench gemm"
  std::string summary;
  OptionsFn options;  // builds the command's options, nothing parsed (tests/fuzz parses with it)
  CommandFn run;
};

// Registers a command at static-initialization time (commands live in the
// executable, so the linker keeps them). `run` builds its Options with `options`.
struct Register {
  Register(std::string name, std::string summary, OptionsFn options, CommandFn run);
};

const std::vector<Command>& commands();
// The command the arguments name: the longest registered name that prefixes
// them ("bench gemm" before "bench"); `words` is set to its number of words.
// nullptr when none does.
const Command* find_command(const std::vector<std::string>& args, size_t& words);

}  // namespace weft::cli
