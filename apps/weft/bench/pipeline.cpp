// weft bench pipeline: the pipeline schedules side by side on one model.
//
// Per schedule, --pp ranks (local threads) train --steps timed steps of
// --microbatches micro-batches after --warmup untimed ones. Step time: the
// median of rank 0's. Measured bubble: the share of the schedule's run a
// stage sits idle, 1 - busy / run (busy: the time in its forward and
// backward passes; run: the executor's whole run, waits included), averaged
// over the stages and the timed steps. Theory: parallel/pipeline/schedule.h's
// theoretical_bubble, the same share with free transfers and F : B = 1 : 2.
// Peak activation bytes: each stage's peak of the memory tracker's
// activations tag over the timed steps (its peak reset after the warm-up).
// --show prints each schedule's timeline at unit costs (simulate.h).
#include <cstdio>
#include <mutex>

#include "../cli.h"
#include "synthetic_data.h"
#include "timing.h"
#include "weft/comm/world.h"
#include "weft/core/memory.h"
#include "weft/io/json.h"
#include "weft/parallel/pipeline/simulate.h"
#include "weft/train/trainer.h"

namespace weft {
namespace {

namespace pl = parallel::pipeline;

struct Row {
  std::string schedule;
  int pp = 1, vpp = 1, microbatches = 1;
  double step_s = 0, bubble = 0, bubble_theory = 0;
  std::vector<int64_t> peak_activation_bytes;  // per stage (rank of the pipeline)
};

Row measure(train::TrainConfig cfg, pl::ScheduleKind kind, int warmup, int steps) {
  cfg.pp_schedule = std::string(pl::schedule_kind_name(kind));
  if (kind != pl::ScheduleKind::interleaved) cfg.vpp = 1;
  cfg.steps = warmup + steps;
  train::validate(cfg);
  const io::Dataset data = synthetic_data(cfg);
  Row row{.schedule = cfg.pp_schedule,
          .pp = cfg.pp,
          .vpp = cfg.vpp,
          .microbatches = static_cast<int>(cfg.grad_accum),
          .peak_activation_bytes = {}};
  row.bubble_theory = pl::theoretical_bubble(kind, cfg.pp, cfg.vpp, row.microbatches);
  row.peak_activation_bytes.assign(static_cast<size_t>(cfg.pp), 0);
  std::mutex mu;
  std::vector<double> rank0_steps;
  double idle_sum = 0;
  comm::run_world(cfg.pp, [&](comm::ProcessGroup& world) {
    train::Trainer t(cfg, world, data);
    for (int i = 0; i < warmup; ++i) t.step();
    MemoryTracker& memory = MemoryTracker::current();
    const Device device = t.model().context()->exec.device();
    memory.reset_peaks();
    std::vector<double> times;
    double idle = 0;
    for (int i = 0; i < steps; ++i) {
      const train::StepResult r = t.step();
      times.push_back(r.times.total);
      const double busy = r.times.forward + r.times.backward;
      if (r.times.pipeline > 0) idle += std::max(0.0, 1.0 - busy / r.times.pipeline);
    }
    const int stage = t.grid().layout().has("pp") ? t.grid().rank_in("pp") : 0;
    std::lock_guard lock(mu);
    row.peak_activation_bytes[static_cast<size_t>(stage)] =
        memory.tag(device, MemoryTag::activations).peak;
    idle_sum += idle;
    if (world.rank() == 0) rank0_steps = times;
  });
  row.step_s = bench::upper_median(rank0_steps);
  row.bubble = idle_sum / (static_cast<double>(cfg.pp) * steps);
  return row;
}

void print_rows(const std::vector<Row>& rows, const train::TrainConfig& cfg, bool json) {
  if (json) {
    for (const Row& r : rows) {
      io::Json j = io::Json::object();
      j["schedule"] = r.schedule;
      j["pp"] = r.pp;
      j["vpp"] = r.vpp;
      j["microbatches"] = r.microbatches;
      j["step_s"] = r.step_s;
      j["bubble"] = r.bubble;
      j["bubble_theory"] = r.bubble_theory;
      io::Json peaks = io::Json::array();
      for (int64_t b : r.peak_activation_bytes) peaks.push_back(b);
      j["peak_activation_bytes"] = std::move(peaks);
      bench::print_json(j);
    }
    return;
  }
  std::printf("%s, context %lld, micro-batch %lld, --pp %d, %d micro-batches (local threads)\n",
              cfg.preset.c_str(), static_cast<long long>(cfg.model.seq),
              static_cast<long long>(cfg.micro_batch), cfg.pp, static_cast<int>(cfg.grad_accum));
  std::printf("%-12s %4s %9s %8s %8s  %s\n", "schedule", "vpp", "step ms", "bubble", "theory",
              "peak activation MiB per stage");
  for (const Row& r : rows) {
    std::string peaks;
    for (int64_t b : r.peak_activation_bytes) {
      peaks += format("{}{:.1f}", peaks.empty() ? "" : " ", static_cast<double>(b) / (1 << 20));
    }
    std::printf("%-12s %4d %9.1f %7.1f%% %7.1f%%  %s\n", r.schedule.c_str(), r.vpp, 1e3 * r.step_s,
                100 * r.bubble, 100 * r.bubble_theory, peaks.c_str());
  }
}

cli::Options bench_pipeline_options() {
  cli::Options opts(
      "weft bench pipeline [options]",
      "The pipeline schedules on one model, --pp stages as local threads sharing this\n"
      "machine's cores. Per schedule: the median step time, the measured bubble (the share\n"
      "of the schedule's run a stage sits idle: 1 - its forward and backward time over the\n"
      "run, averaged over stages), the theoretical bubble (free transfers, F : B = 1 : 2;\n"
      "gpipe and 1f1b (P-1)/(M+P-1), interleaved (P-1)/(VM+P-1), zero-bubble\n"
      "(P-1)/(3M+P-1)) and each stage's peak activation bytes (the memory tracker's\n"
      "activations tag over the timed steps). --show prints each schedule's timeline at\n"
      "unit costs. Under zero-bubble the Linear layers' weight gradients run in the weight\n"
      "pass (PassContext::defer_weight_grads), on copies of their operands.");
  opts.option("preset", "NAME", "tiny", "model preset (as weft train --preset)")
      .option("pp", "N", "2", "pipeline stages")
      .option("microbatches", "M", "8", "micro-batches per step (--grad-accum)")
      .option("vpp", "V", "2", "virtual stages per rank of the interleaved schedule")
      .option("schedules", "LIST", "gpipe,1f1b,interleaved,zero-bubble", "schedules to run")
      .option("seq", "T", "", "context length (default: the preset's)")
      .option("micro-batch", "B", "1", "sequences per micro-batch")
      .option("steps", "N", "3", "timed steps per schedule")
      .option("warmup", "N", "1", "untimed steps first")
      .flag("show", "print each schedule's timeline (unit costs)")
      .flag("json", "print one JSON object per schedule");
  return opts;
}

std::vector<pl::ScheduleKind> parse_schedules(const std::string& text) {
  std::vector<pl::ScheduleKind> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    try {
      out.push_back(pl::parse_schedule_kind(text.substr(start, end - start)));
    } catch (const Error& e) {
      WEFT_FAIL("--schedules {}: {}", text, e.what());
    }
    start = end + 1;
  }
  return out;
}

int bench_pipeline(const std::vector<std::string>& args) {
  cli::Options opts = bench_pipeline_options();
  opts.parse(args);
  WEFT_CHECK(!comm::launched_by_mpi(),
             "weft bench pipeline runs its stages as threads: start it without mpirun");
  train::TrainConfig cfg;
  io::Json s = io::Json::object();
  s["preset"] = opts.str("preset");
  if (opts.given("seq")) s["seq"] = opts.str("seq");
  s["micro-batch"] = opts.str("micro-batch");
  s["tp"] = "1";
  s["pp"] = opts.str("pp");
  s["grad-accum"] = opts.str("microbatches");
  train::apply_settings(cfg, s, "");
  cfg.vpp = static_cast<int>(opts.integer("vpp"));
  cfg.warmup = 0;
  cfg.sample_tokens = 0;
  cfg.eval_every = 0;
  const int steps = static_cast<int>(opts.integer("steps"));
  const int warmup = static_cast<int>(opts.integer("warmup"));
  WEFT_CHECK(steps >= 1 && warmup >= 1, "--steps and --warmup must be at least 1");
  const std::vector<pl::ScheduleKind> kinds = parse_schedules(opts.str("schedules"));
  const bool json = opts.flag_set("json");
  std::vector<Row> rows;
  for (pl::ScheduleKind k : kinds) {
    if (opts.flag_set("show")) {
      const int V = k == pl::ScheduleKind::interleaved ? cfg.vpp : 1;
      const std::string problem =
          pl::layout_problem(k, cfg.pp, V, static_cast<int>(cfg.grad_accum));
      WEFT_CHECK(problem.empty(), "{}", problem);
      const pl::PipelineSchedule sched =
          pl::make_schedule(k, cfg.pp, V, static_cast<int>(cfg.grad_accum));
      const pl::Simulation sim = pl::simulate(sched);
      std::printf("%s (pp %d, vpp %d, %d micro-batches): bubble %.1f%% at unit costs\n%s\n",
                  std::string(pl::schedule_kind_name(k)).c_str(), cfg.pp, V,
                  static_cast<int>(cfg.grad_accum), 100 * sim.bubble(),
                  pl::format_timeline(sched, sim).c_str());
    }
    rows.push_back(measure(cfg, k, warmup, steps));
  }
  print_rows(rows, cfg, json);
  return 0;
}

const cli::Register reg("bench pipeline",
                        "pipeline schedules: step time, measured and theoretical bubble, peak "
                        "activation bytes per stage",
                        bench_pipeline_options, bench_pipeline);

}  // namespace
}  // namespace weft
