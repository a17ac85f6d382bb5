// weft bench load: what checking a checkpoint costs when it is loaded. Saves
// a checkpoint of a preset model (with AdamW moments) once, then loads it
// again and again, the variants alternating so that each sees the same page
// cache: unchecked (no checksums, no finite check), finite check only, and
// checked (checksums and finite check, what weft does). Median of --repeats,
// in wall time and in the loading thread's CPU time (steadier on a shared
// machine).
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "../cli.h"
#include "timing.h"
#include "weft/comm/grid.h"
#include "weft/comm/local.h"
#include "weft/core/threads.h"
#include "weft/io/checkpoint.h"
#include "weft/io/json.h"
#include "weft/nn/gpt.h"
#include "weft/optim/adamw.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

struct Variant {
  const char* name;
  io::ReadOptions options;
};

cli::Options options() {
  cli::Options opts(
      "weft bench load [options]",
      "Times loading a checkpoint of a preset model with and without weft's checks\n"
      "(XXH3-64 checksums of every byte read, and that every value is finite), the\n"
      "variants alternating in one run; prints the median of each and the ratio to\n"
      "the unchecked load. The checkpoint is written first (to --dir, or a temporary\n"
      "directory that is removed afterwards).");
  opts.option("preset", "NAME", "gpt2-124m", "model preset: tiny or gpt2-124m")
      .option("repeats", "N", "5", "loads of each variant")
      .option("dir", "DIR", "temporary", "where the checkpoint is written (kept when given)")
      .flag("json", "print one JSON object");
  return opts;
}

const Variant kVariants[] = {
    {"unchecked", {.verify = false, .allow_nonfinite = true}},
    {"finite check", {.verify = false}},
    {"checked (default)", {}},
};

// Per variant: the seconds of each load, wall and the loading thread's CPU,
// with the optimizer state (resume) and without (eval).
struct Loads {
  std::vector<double> with_optimizer[3], weights_only[3], cpu_opt[3], cpu_weights[3];
  int64_t bytes = 0;  // of the checkpoint
};

// Saves a checkpoint of `preset` to `dir`, then loads it `repeats` times in
// each variant, the variants alternating.
Loads measure(const std::string& preset, const fs::path& dir, int64_t repeats) {
  Loads l;
  comm::run_local(1, [&](comm::ProcessGroup& world) {
    set_num_threads(0);
    comm::Grid grid(world, "tp-dp", {{"tp", 1}});
    nn::GptConfig cfg = nn::gpt_preset(preset);
    nn::Gpt model(parallel::make_context(grid.group_ptr("tp")), cfg);
    optim::AdamW opt(model.parameters(), {});
    for (size_t i = 0; i < opt.parameters().size(); ++i) {
      opt.first_moments()[i].fill(1e-3f);
      opt.second_moments()[i].fill(1e-6f);
    }
    io::TrainState state;
    state.rng = parallel::RngTracker(model.context()->seed, 0).state();
    state.config = io::model_shape_json(cfg);
    std::fprintf(stderr, "bench load: writing %s\n", dir.c_str());
    io::save_checkpoint(dir.string(), world, grid, model, &opt, state);
    for (const auto& e : fs::directory_iterator(dir))
      l.bytes += static_cast<int64_t>(e.file_size());
    auto time = [&](optim::AdamW* o, const io::ReadOptions& ro, std::vector<double>& wall,
                    std::vector<double>& cpu) {
      const double c0 = bench::thread_cpu_seconds();
      wall.push_back(
          bench::seconds([&] { io::load_checkpoint(dir.string(), world, grid, model, o, ro); }));
      cpu.push_back(bench::thread_cpu_seconds() - c0);
    };
    std::vector<double> ignored[2];
    time(&opt, {}, ignored[0], ignored[1]);  // warm the page cache
    std::vector<std::function<void()>> loads;
    for (int v = 0; v < 3; ++v) {
      loads.emplace_back(
          [&, v] { time(&opt, kVariants[v].options, l.with_optimizer[v], l.cpu_opt[v]); });
      loads.emplace_back(
          [&, v] { time(nullptr, kVariants[v].options, l.weights_only[v], l.cpu_weights[v]); });
    }
    bench::in_rounds(repeats, loads);
  });
  return l;
}

void print(const Loads& l, const std::string& preset, int64_t repeats, bool json) {
  using bench::median;
  const double base[4] = {median(l.with_optimizer[0]), median(l.weights_only[0]),
                          median(l.cpu_opt[0]), median(l.cpu_weights[0])};
  if (json) {
    io::Json out = io::Json::object();
    out["preset"] = preset;
    out["checkpoint_bytes"] = l.bytes;
    out["repeats"] = repeats;
    io::Json rows = io::Json::array();
    for (int v = 0; v < 3; ++v) {
      io::Json row = io::Json::object();
      row["variant"] = kVariants[v].name;
      row["resume_s"] = median(l.with_optimizer[v]);
      row["weights_s"] = median(l.weights_only[v]);
      row["resume_ratio"] = median(l.with_optimizer[v]) / base[0];
      row["weights_ratio"] = median(l.weights_only[v]) / base[1];
      row["resume_cpu_s"] = median(l.cpu_opt[v]);
      row["weights_cpu_s"] = median(l.cpu_weights[v]);
      rows.push_back(std::move(row));
    }
    out["variants"] = std::move(rows);
    bench::print_json(out);
    return;
  }
  std::printf("checkpoint of %s: %.1f MiB; median of %lld loads each, variants alternating\n",
              preset.c_str(), static_cast<double>(l.bytes) / 1048576.0,
              static_cast<long long>(repeats));
  std::printf("%-18s %-38s %s\n", "", "weights+optimizer (resume)", "weights only (eval)");
  std::printf("%-18s %18s %19s %18s %19s\n", "variant", "wall s", "cpu s", "wall s", "cpu s");
  for (int v = 0; v < 3; ++v) {
    std::printf("%-18s %8.3f (x%.3f) %9.3f (x%.3f) %8.3f (x%.3f) %9.3f (x%.3f)\n",
                kVariants[v].name, median(l.with_optimizer[v]),
                median(l.with_optimizer[v]) / base[0], median(l.cpu_opt[v]),
                median(l.cpu_opt[v]) / base[2], median(l.weights_only[v]),
                median(l.weights_only[v]) / base[1], median(l.cpu_weights[v]),
                median(l.cpu_weights[v]) / base[3]);
  }
}

int run(const std::vector<std::string>& args) {
  cli::Options opts = options();
  opts.parse(args);
  const int64_t repeats = opts.integer("repeats");
  WEFT_CHECK(repeats >= 1, "--repeats must be at least 1, got {}", repeats);
  fs::path dir;
  if (opts.given("dir")) {
    dir = opts.str("dir");
  } else {
    dir = fs::temp_directory_path() / ("weft-bench-load-" + std::to_string(std::random_device{}()));
  }
  const Loads loads = measure(opts.str("preset"), dir, repeats);
  if (!opts.given("dir")) fs::remove_all(dir);
  print(loads, opts.str("preset"), repeats, opts.flag_set("json"));
  return 0;
}

const cli::Register reg("bench load",
                        "time loading a checkpoint with and without checksums and finite checks",
                        options, run);

}  // namespace
}  // namespace weft
