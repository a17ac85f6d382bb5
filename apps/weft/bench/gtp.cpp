// weft bench gtp: what generalized tensor parallelism costs and saves.
//
// Memory: the per-rank bytes of parameters, gradients and optimizer state
// at GTP 1, 2, 4 (the memory tracker's params / grads / optimizer tags after
// a training step), against 1/N of GTP 1, and the weight cache (its pooled
// buffers: gathered weights and full gradients). Speed: the same world at
// --gtp N and at --dp N (the same global batch), alternating, and how much
// of the all-gather time was exposed: the time materializations waited for
// an all-gather over the time the all-gathers ran (each from its start on
// the gtp group's worker, after the operation before it, to its completion;
// observed with the group's CommObserver). Under --precision R the bytes a
// rank sends per weight element in its gathers (the prefetch chain's
// counts): the quantized Linear weights' (data and scales) and all of them
// (the embedding is gathered in high precision).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>

#include "../cli.h"
#include "synthetic_data.h"
#include "timing.h"
#include "weft/comm/world.h"
#include "weft/core/memory.h"
#include "weft/io/json.h"
#include "weft/parallel/gtp/runtime.h"
#include "weft/train/trainer.h"

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;

struct MemoryRow {
  int gtp = 1;
  int64_t params = 0, grads = 0, optimizer = 0, cache = 0;
  int64_t total() const { return params + grads + optimizer; }
};

// Rank 0's bytes after one step at `gtp` ranks.
MemoryRow measure_memory(train::TrainConfig cfg, int gtp) {
  cfg.gtp = gtp;
  cfg.steps = 1;
  const io::Dataset data = synthetic_data(cfg);
  MemoryRow row{.gtp = gtp};
  comm::run_world(gtp, [&](comm::ProcessGroup& world) {
    train::Trainer t(cfg, world, data);
    t.step();
    if (world.rank() != 0) return;
    const MemoryTracker& m = MemoryTracker::current();
    const Device cpu = t.model().context()->exec.device();
    row.params = m.tag(cpu, MemoryTag::params).live;
    row.grads = m.tag(cpu, MemoryTag::grads).live;
    row.optimizer = m.tag(cpu, MemoryTag::optimizer).live;
    if (const auto& rt = t.model().context()->gtp_runtime) row.cache = rt->cache.bytes();
  });
  return row;
}

// The all-gather time of a group, from its operations' events: they run one
// after another on the group's worker, each from max(issue, the previous
// one's completion) to its completion.
class GatherClock {
 public:
  void observe(comm::ProcessGroup& g) {
    g.set_observer([this](const comm::CommEvent& e) {
      if (e.kind != comm::CommEvent::Kind::issued && e.kind != comm::CommEvent::Kind::completed)
        return;
      std::lock_guard lock(mu_);
      Op& op = ops_[e.index];
      op.gather = e.op == comm::OpKind::all_gather;
      (e.kind == comm::CommEvent::Kind::issued ? op.issued : op.completed) = Clock::now();
    });
  }
  // Seconds the all-gathers ran; forgets them.
  double take_seconds() {
    std::lock_guard lock(mu_);
    double s = 0;
    Clock::time_point previous{};
    for (const auto& [index, op] : ops_) {
      const Clock::time_point start = std::max(op.issued, previous);
      if (op.gather) s += std::chrono::duration<double>(op.completed - start).count();
      previous = op.completed;
    }
    ops_.clear();
    return s;
  }

 private:
  struct Op {
    bool gather = false;
    Clock::time_point issued{}, completed{};
  };
  std::mutex mu_;
  std::map<int64_t, Op> ops_;
};

struct SpeedRun {
  std::vector<double> step_s;  // rank 0's timed steps
  double exposed_s = 0, gather_s = 0;
  parallel::gtp::PrefetchChain::Stats chain{};  // rank 0's, over the timed steps
};

SpeedRun measure_speed(const train::TrainConfig& cfg, int world_size, int warmup, int steps) {
  const io::Dataset data = synthetic_data(cfg);
  SpeedRun out;
  std::mutex mu;
  comm::run_world(world_size, [&](comm::ProcessGroup& world) {
    train::Trainer t(cfg, world, data);
    for (int i = 0; i < warmup; ++i) t.step();
    parallel::gtp::Runtime* rt = t.model().context()->gtp_runtime.get();
    GatherClock clock;
    if (rt) {
      rt->chain.reset_stats();
      clock.observe(t.grid().group("gtp"));
    }
    std::vector<double> times;
    for (int i = 0; i < steps; ++i) times.push_back(t.step().times.total);
    if (rt) t.grid().group("gtp").set_observer(nullptr);
    if (world.rank() != 0) return;
    std::lock_guard lock(mu);
    out.step_s = times;
    if (rt) {
      out.exposed_s = rt->chain.stats().exposed_gather_s;
      out.gather_s = clock.take_seconds();
      out.chain = rt->chain.stats();
    }
  });
  return out;
}

double mib(int64_t b) { return static_cast<double>(b) / (1 << 20); }

cli::Options bench_gtp_options() {
  cli::Options opts(
      "weft bench gtp [options]",
      "Generalized tensor parallelism on a GPT (local backend: ranks are threads sharing\n"
      "this machine's cores). Memory: rank 0's bytes of parameters, gradients and AdamW\n"
      "state at each --sizes N after one training step, read from the memory tracker,\n"
      "against 1/N of N=1, and the weight cache (gathered weights and full gradients).\n"
      "Speed: the step time at --gtp N against --dp N on the same N ranks with the same\n"
      "global batch, alternating rounds (medians), and the exposed all-gather time (the\n"
      "waits of materializations) over the total all-gather time (from the gtp group's\n"
      "operation events), and the bytes rank 0 sent per weight element in its gathers\n"
      "(all of them, and under a quantized --precision the quantized ones: data and scales).");
  opts.option("preset", "NAME", "gpt2-124m", "model preset: tiny or gpt2-124m")
      .option("seq", "T", "256", "context length")
      .option("dtype", "f32|bf16", "f32", "compute type")
      .option("precision", "RECIPE", "f32",
              "f32, bf16, fp8-delayed, fp8-current, fp8-block, mxfp8 or nvfp4 (as weft train "
              "--precision): "
              "under a quantized recipe the Linear weights are gathered quantized, and the speed "
              "table adds the bytes sent per weight element")
      .option("sizes", "LIST", "1,2,4", "GTP sizes of the memory table")
      .option("gtp", "N", "2", "GTP size of the speed comparison (against --dp N)")
      .option("micro-batch", "B", "1", "sequences per rank")
      .option("cache", "N", "2", "gathered weights alive at once (--gtp-cache)")
      .option("steps", "N", "3", "timed steps per round")
      .option("warmup", "N", "1", "untimed steps first (the chain is recorded in the first)")
      .option("rounds", "N", "3", "alternating rounds of the speed comparison")
      .flag("no-speed", "the memory table only")
      .flag("json", "print JSON objects instead of tables");
  return opts;
}

std::vector<int> parse_sizes(const std::string& text) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    WEFT_CHECK(!item.empty() && item.find_first_not_of("0123456789") == std::string::npos &&
                   item.size() < 4 && std::stoi(item) >= 1,
               "--sizes {}: give positive GTP sizes separated by commas, e.g. 1,2,4", text);
    out.push_back(std::stoi(item));
    start = end + 1;
  }
  return out;
}

// The memory table: a row per GTP size, against 1/N of GTP 1 where it was measured.
void print_memory(const std::vector<MemoryRow>& rows, const train::TrainConfig& cfg,
                  const std::string& cache, bool json) {
  const MemoryRow* one = nullptr;
  for (const MemoryRow& r : rows) {
    if (r.gtp == 1) one = &r;
  }
  if (!json) {
    std::printf("%s, %s, context %lld, micro-batch %lld per rank, cache of %s gathered weights\n",
                cfg.preset.c_str(), parallel::recipe_name(cfg.precision.recipe),
                static_cast<long long>(cfg.model.seq), static_cast<long long>(cfg.micro_batch),
                cache.c_str());
    std::printf("%-5s %11s %11s %11s %11s %9s %11s %11s %6s\n", "gtp", "params MiB", "grads MiB",
                "optim MiB", "total MiB", "vs gtp 1", "1/N MiB", "cache MiB", "<=1/N+cache");
  }
  for (const MemoryRow& r : rows) {
    const double target = one ? mib(one->total()) / r.gtp : 0;
    const bool ok = one && mib(r.total()) <= target + mib(r.cache);
    if (json) {
      io::Json j = io::Json::object();
      j["table"] = "memory";
      j["gtp"] = r.gtp;
      j["params_bytes"] = r.params;
      j["grads_bytes"] = r.grads;
      j["optimizer_bytes"] = r.optimizer;
      j["total_bytes"] = r.total();
      j["cache_bytes"] = r.cache;
      if (one) j["vs_gtp1"] = static_cast<double>(r.total()) / static_cast<double>(one->total());
      bench::print_json(j);
    } else {
      // Without GTP 1 among the sizes there is nothing to compare with.
      const std::string vs = one ? format("{:.3f}x", static_cast<double>(r.total()) /
                                                         static_cast<double>(one->total()))
                                 : "-";
      const std::string per_n = one ? format("{:.1f}", target) : "-";
      std::printf("%-5d %11.1f %11.1f %11.1f %11.1f %9s %11s %11.1f %6s\n", r.gtp, mib(r.params),
                  mib(r.grads), mib(r.optimizer), mib(r.total()), vs.c_str(), per_n.c_str(),
                  mib(r.cache), one ? (ok ? "yes" : "no") : "-");
    }
  }
}

// The speed comparison's result: medians, all-gather totals and what the
// gathers moved.
struct SpeedTable {
  int ranks = 0, rounds = 0, steps = 0;
  std::string recipe;
  double dp_s = 0, gtp_s = 0, exposed_s = 0, gather_s = 0;
  parallel::gtp::PrefetchChain::Stats chain{};
  double share() const { return gather_s > 0 ? exposed_s / gather_s : 0; }
};

void print_speed(const SpeedTable& t, bool json) {
  const double quantized = t.chain.quantized_bytes_per_element();
  if (json) {
    io::Json j = io::Json::object();
    j["table"] = "speed";
    j["ranks"] = t.ranks;
    j["precision"] = t.recipe;
    j["dp_step_s"] = t.dp_s;
    j["gtp_step_s"] = t.gtp_s;
    j["gtp_vs_dp"] = t.gtp_s / t.dp_s;
    j["exposed_all_gather_s"] = t.exposed_s;
    j["all_gather_s"] = t.gather_s;
    j["exposed_share"] = t.share();
    j["gather_bytes_per_element"] = t.chain.bytes_per_element();
    if (t.chain.quantized_elements > 0) j["quantized_gather_bytes_per_element"] = quantized;
    bench::print_json(j);
    return;
  }
  std::printf("\n%d ranks, %s, %d rounds x %d steps (medians)\n%-12s %10s %8s %16s %16s %9s\n",
              t.ranks, t.recipe.c_str(), t.rounds, t.steps, "layout", "step ms", "vs dp",
              "exposed AG ms", "all-gather ms", "exposed");
  std::printf("%-12s %10.1f %7.2fx %16s %16s %9s\n", format("dp {}", t.ranks).c_str(), 1e3 * t.dp_s,
              1.0, "-", "-", "-");
  std::printf("%-12s %10.1f %7.2fx %16.1f %16.1f %8.1f%%\n", format("gtp {}", t.ranks).c_str(),
              1e3 * t.gtp_s, t.gtp_s / t.dp_s, 1e3 * t.exposed_s, 1e3 * t.gather_s,
              100 * t.share());
  // Bytes a rank sent per weight element of its shards, per gather.
  std::printf("gathered bytes per element: %.4f over all gathers", t.chain.bytes_per_element());
  if (t.chain.quantized_elements > 0) {
    std::printf(", %.4f over the quantized ones (%.1f of %.1f MiB sent)", quantized,
                mib(t.chain.quantized_bytes), mib(t.chain.gathered_bytes));
  }
  std::printf("\n");
}

// The speed comparison: --gtp N against --dp N, alternating rounds, the
// median step of each.
SpeedTable compare_speed(const train::TrainConfig& cfg, int n, int warmup, int steps, int rounds) {
  train::TrainConfig gtp_cfg = cfg, dp_cfg = cfg;
  gtp_cfg.gtp = n;
  gtp_cfg.steps = dp_cfg.steps = warmup + steps;
  dp_cfg.dp = n;
  SpeedTable t;
  t.ranks = n;
  t.rounds = rounds;
  t.steps = steps;
  t.recipe = parallel::recipe_name(cfg.precision.recipe);
  std::vector<double> gtp_steps, dp_steps;
  auto dp = [&] {
    const SpeedRun d = measure_speed(dp_cfg, n, warmup, steps);
    dp_steps.insert(dp_steps.end(), d.step_s.begin(), d.step_s.end());
  };
  auto gtp = [&] {
    const SpeedRun g = measure_speed(gtp_cfg, n, warmup, steps);
    gtp_steps.insert(gtp_steps.end(), g.step_s.begin(), g.step_s.end());
    t.exposed_s += g.exposed_s;
    t.gather_s += g.gather_s;
    t.chain.gathers += g.chain.gathers;
    t.chain.gathered_bytes += g.chain.gathered_bytes;
    t.chain.gathered_elements += g.chain.gathered_elements;
    t.chain.quantized_bytes += g.chain.quantized_bytes;
    t.chain.quantized_elements += g.chain.quantized_elements;
  };
  bench::in_rounds(rounds, {dp, gtp});
  t.dp_s = bench::upper_median(dp_steps);
  t.gtp_s = bench::upper_median(gtp_steps);
  return t;
}

int bench_gtp(const std::vector<std::string>& args) {
  cli::Options opts = bench_gtp_options();
  opts.parse(args);
  WEFT_CHECK(!comm::launched_by_mpi(),
             "weft bench gtp runs its ranks as threads: start it without mpirun");
  train::TrainConfig cfg;
  io::Json s = io::Json::object();
  s["preset"] = opts.str("preset");
  s["seq"] = opts.str("seq");
  s["dtype"] = opts.str("dtype");
  if (opts.given("precision")) s["precision"] = opts.str("precision");
  s["micro-batch"] = opts.str("micro-batch");
  s["gtp-cache"] = opts.str("cache");
  s["tp"] = "1";
  train::apply_settings(cfg, s, "");
  cfg.warmup = 0;
  cfg.sample_tokens = 0;
  cfg.eval_every = 0;
  train::validate(cfg);
  const std::vector<int> sizes = parse_sizes(opts.str("sizes"));
  const int n = static_cast<int>(opts.integer("gtp"));
  const int steps = static_cast<int>(opts.integer("steps"));
  const int warmup = static_cast<int>(opts.integer("warmup"));
  const int rounds = static_cast<int>(opts.integer("rounds"));
  WEFT_CHECK(n >= 2 && steps >= 1 && warmup >= 1 && rounds >= 1,
             "--gtp must be at least 2, --steps, --warmup and --rounds at least 1");
  const bool json = opts.flag_set("json");

  std::vector<MemoryRow> rows;
  for (int g : sizes) rows.push_back(measure_memory(cfg, g));
  print_memory(rows, cfg, opts.str("cache"), json);
  if (opts.flag_set("no-speed")) return 0;
  print_speed(compare_speed(cfg, n, warmup, steps, rounds), json);
  return 0;
}

const cli::Register reg("bench gtp",
                        "generalized tensor parallelism: memory per rank at GTP 1/2/4, speed "
                        "against data parallelism, exposed all-gather time",
                        bench_gtp_options, bench_gtp);

}  // namespace
}  // namespace weft
