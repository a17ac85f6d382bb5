// The command line of every `weft` command: the input is the argument list
// (NUL-separated). It picks the command as main() does, parses the arguments
// with that command's declared options (apps/weft/cli.h), reads every option
// through every typed accessor (integer, number, byte count, choice, token
// ids) and, as the commands do, turns them into settings: train's keys
// through apply_settings and validate, topology's grid through GridLayout.
// No command runs.
#include "../../apps/weft/cli.h"
#include "fuzz.h"
#include "weft/comm/grid.h"
#include "weft/train/config.h"

namespace {

namespace cli = weft::cli;

// Most options refuse most accessors ("--data expects an integer"): quietly.
template <typename Fn>
void attempt(Fn&& fn) {
  try {
    fn();
  } catch (const weft::Error&) {
  }
}

void read_every_option(const cli::Options& opts) {
  for (const std::string& name : opts.names()) {
    (void)opts.given(name);
    (void)opts.flag_set(name);
    const std::string& value = opts.str(name);
    attempt([&] { (void)opts.integer(name); });
    attempt([&] { (void)opts.number(name); });
    attempt([&] { (void)opts.bytes(name); });
    attempt([&] { (void)opts.choice(name, {"f32", "bf16", "off", "seq"}); });
    attempt([&] { (void)cli::parse_token_ids(value); });
  }
}

// `weft train`: the command-line layer of its settings (train.cpp's resolve).
void train_settings(const cli::Options& opts) {
  weft::train::TrainConfig cfg;
  weft::io::Json flags = weft::io::Json::object();
  for (const weft::train::ConfigKey& k : weft::train::train_config_keys()) {
    if (opts.given(k.name)) flags[k.name] = opts.str(k.name);
  }
  weft::train::apply_settings(cfg, flags, "");
  weft::train::validate(cfg);
  (void)cfg.to_json();
}

// `weft topology`: the grid of --world, --order and the sizes.
void topology_grid(const cli::Options& opts) {
  const int64_t world = opts.integer("world");
  if (world < 1 || world > 4096) return;  // the command prints every rank
  std::vector<std::pair<std::string, int>> sizes;
  for (const char* name : {"tp", "gtp", "dp"}) {
    if (opts.given(name)) sizes.emplace_back(name, static_cast<int>(opts.integer(name)));
  }
  const weft::comm::GridLayout layout(static_cast<int>(world), opts.str("order"), sizes);
  for (const std::string& dim : layout.names()) (void)layout.groups(dim);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args;
  for (std::string_view a :
       weft::fuzz::split({reinterpret_cast<const char*>(data), size}, '\0', 64))
    args.emplace_back(a);
  size_t words = 0;
  const cli::Command* command = cli::find_command(args, words);
  if (!command) return 0;
  cli::Options opts = command->options();
  try {
    opts.parse({args.begin() + static_cast<long>(words), args.end()});
  } catch (const cli::HelpShown&) {
    return 0;
  } catch (const weft::Error&) {
    return 0;
  }
  read_every_option(opts);
  if (command->name == "train") weft::fuzz::refused_ok([&] { train_settings(opts); });
  if (command->name == "topology") weft::fuzz::refused_ok([&] { topology_grid(opts); });
  return 0;
}
