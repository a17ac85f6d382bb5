// `weft plan`: the layouts a world allows for a model, priced by the memory
// and cost models (plan/), best first; --evaluate prices one layout.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "bench/timing.h"
#include "cli.h"
#include "plan_options.h"
#include "weft/io/json.h"
#include "weft/plan/machine.h"
#include "weft/plan/search.h"
#include "weft/train/plan_layout.h"

namespace weft {
namespace {

cli::Options plan_options() {
  cli::Options opts(
      "weft plan [options]",
      "Enumerates the layouts (tp, sp, dp, gtp, ep, micro-batch; pp, vpp, cp, the distributed\n"
      "optimizer and recomputation as weft train learns them) that --world ranks allow for\n"
      "a model at --global-batch sequences per step, predicts each one's peak memory per rank\n"
      "(the memory model: parameters, gradients, optimizer state, activations, workspaces,\n"
      "weight cache) and tokens/s (the cost model: GEMM FLOPs at this machine's measured GEMM\n"
      "rate, memory-bound passes and collectives at its measured copy bandwidth; probes run\n"
      "once and are cached in ~/.cache/weft; with --device cuda a cluster's figures), drops\n"
      "those above --memory-limit, and prints the rest fastest first with the exact weft\n"
      "train options. --evaluate prices one layout of any dimensions (e.g. Llama 3 405B's).");
  add_shape_options(opts);
  opts.option("world", "N", "1", "ranks (GPUs, or local ranks on this CPU)")
      .option("global-batch", "B", "world", "sequences per optimizer step")
      .option("memory-limit", "SIZE", "none", "bytes per rank a layout may need (40GiB, 512MiB)")
      .option("device", "cpu|cuda", "cpu", "price on this CPU (probes) or on GPUs (--cluster)")
      .option("cluster", "FILE", "H100",
              "--device cuda: a JSON cluster description (gpus_per_node, peak_tflops, "
              "gemm_efficiency, gemm_half_gflops, attention_efficiency, hbm_GBps, nvlink_GBps, "
              "network_GBps, latency_us, kernel_launch_us; each optional, the defaults an H100 SXM "
              "cluster's)")
      .option("dtype", "f32|bf16", "f32 on cpu, bf16 on cuda", "compute type")
      .option("top", "K", "10", "layouts printed")
      .option("evaluate", "OPTIONS", "none",
              "price this layout alone: weft train's layout options in one string, e.g. "
              "'--tp 8 --pp 16 --vpp 2 --dp 64 --micro-batch 1 --grad-accum 32' (any dimension; "
              "the world and global batch follow from it)")
      .flag("json",
            "one JSON object per layout, best first: args, predicted_peak_bytes, "
            "predicted_tokens_per_s (and the breakdowns)");
  return opts;
}

io::Json to_json(const plan::PlannedLayout& p, bool gpu) {
  io::Json j = io::Json::object();
  io::Json args = io::Json::array();
  for (const std::string& a : p.layout.args()) args.push_back(a);
  j["args"] = std::move(args);
  j["predicted_peak_bytes"] = p.memory.total();
  j["predicted_tokens_per_s"] = p.cost.tokens_per_s;
  j["predicted_step_s"] = p.cost.total;
  if (gpu) j["predicted_mfu"] = p.cost.mfu;
  io::Json mem = io::Json::object();
  mem["parameters"] = p.memory.parameters;
  mem["gradients"] = p.memory.gradients;
  mem["optimizer"] = p.memory.optimizer;
  mem["activations"] = p.memory.activations;
  mem["workspaces"] = p.memory.workspaces;
  mem["comm_buffers"] = p.memory.comm_buffers;
  mem["weight_cache"] = p.memory.weight_cache;
  j["memory"] = std::move(mem);
  io::Json t = io::Json::object();
  t["gemm"] = p.cost.gemm;
  t["attention"] = p.cost.attention;
  t["memory_bound"] = p.cost.memory_bound;
  t["optimizer"] = p.cost.optimizer;
  t["tp_comm"] = p.cost.tp_comm;
  t["cp_comm"] = p.cost.cp_comm;
  t["ep_comm"] = p.cost.ep_comm;
  t["gtp_comm"] = p.cost.gtp_comm;
  t["pp_comm"] = p.cost.pp_comm;
  t["dp_comm"] = p.cost.dp_comm;
  t["bubble"] = p.cost.bubble;
  j["step_s"] = std::move(t);
  return j;
}

void print_table(const std::vector<plan::PlannedLayout>& rows, size_t top, bool gpu) {
  std::printf("%4s %11s %13s %10s%s  %s\n", "#", "peak/rank", "tokens/s", "step ms",
              gpu ? "    MFU" : "", "weft train options");
  for (size_t i = 0; i < rows.size() && i < top; ++i) {
    const plan::PlannedLayout& p = rows[i];
    std::printf("%4zu %11s %13.0f %10.1f", i + 1, plan::format_bytes(p.memory.total()).c_str(),
                p.cost.tokens_per_s, 1e3 * p.cost.total);
    if (gpu) std::printf(" %5.1f%%", 100 * p.cost.mfu);
    std::printf("  %s\n", p.layout.text().c_str());
  }
}

void print_evaluation(const plan::PlannedLayout& p, bool gpu) {
  const plan::MemoryBreakdown& m = p.memory;
  const plan::StepCost& c = p.cost;
  std::printf("layout: %s (%d ranks, %lld sequences per step)\n", p.layout.text().c_str(),
              p.layout.world(), static_cast<long long>(p.layout.global_batch()));
  std::printf(
      "memory per rank (largest): %s = parameters %s + gradients %s + optimizer %s + "
      "activations %s + workspaces %s + comm %s + weight cache %s\n",
      plan::format_bytes(m.total()).c_str(), plan::format_bytes(m.parameters).c_str(),
      plan::format_bytes(m.gradients).c_str(), plan::format_bytes(m.optimizer).c_str(),
      plan::format_bytes(m.activations).c_str(), plan::format_bytes(m.workspaces).c_str(),
      plan::format_bytes(m.comm_buffers).c_str(), plan::format_bytes(m.weight_cache).c_str());
  std::printf(
      "step %.3f s = GEMMs %.3f + attention %.3f + memory-bound %.3f + optimizer %.3f + exposed "
      "comm (tp %.3f, cp %.3f, ep %.3f, gtp %.3f, pp %.3f, dp %.3f) + bubble %.3f\n",
      c.total, c.gemm, c.attention, c.memory_bound, c.optimizer, c.tp_comm, c.cp_comm, c.ep_comm,
      c.gtp_comm, c.pp_comm, c.dp_comm, c.bubble);
  const double per_rank = c.tokens_per_s * c.model_flops_per_token / p.layout.world();
  if (gpu) {
    std::printf("tokens/s %.0f; %.1f TFLOP/s per rank", c.tokens_per_s, per_rank / 1e12);
  } else {
    std::printf("tokens/s %.0f; %.1f GFLOP/s per rank", c.tokens_per_s, per_rank / 1e9);
  }
  if (gpu) std::printf("; MFU %.1f%%", 100 * c.mfu);
  std::printf("\n");
}

int plan_command(const std::vector<std::string>& args) {
  cli::Options opts = plan_options();
  opts.parse(args);
  const bool gpu = opts.choice("device", {"cpu", "cuda"}) == "cuda";
  WEFT_CHECK(!opts.given("cluster") || gpu,
             "--cluster describes GPUs: pass it with --device cuda (on the CPU the probes "
             "measure this machine)");
  const train::TrainConfig shape = shape_config(opts, gpu);
  plan::Workload w = train::plan_workload(shape);
  w.gpu = gpu;
  const bool json = opts.flag_set("json");
  const int64_t top = opts.integer("top");
  WEFT_CHECK(top >= 1, "--top must be at least 1, got {}", top);

  plan::PlanRequest req{.workload = w};
  plan::Layout evaluated;
  if (opts.given("evaluate")) {
    evaluated = plan::parse_layout_args(opts.str("evaluate"));
    req.world = evaluated.world();
    req.global_batch = evaluated.global_batch();
    WEFT_CHECK(!opts.given("world") || opts.integer("world") == req.world,
               "--world {} and the --evaluate layout's {} ranks disagree: drop --world",
               opts.integer("world"), req.world);
    const std::string problem = plan::layout_problem(w, evaluated, req.world, req.global_batch);
    WEFT_CHECK(problem.empty(), "--evaluate '{}': {}", opts.str("evaluate"), problem);
  } else {
    const int64_t world = opts.integer("world");
    WEFT_CHECK(world >= 1 && world <= plan::kMaxWorld, "--world must lie in [1, {}], got {}",
               plan::kMaxWorld, world);
    req.world = static_cast<int>(world);
    req.global_batch = opts.given("global-batch") ? opts.integer("global-batch") : req.world;
  }
  if (opts.given("memory-limit")) {
    req.memory_limit = plan::parse_memory_size(opts.str("memory-limit"), "--memory-limit");
  }
  plan::Machine machine;
  if (gpu) {
    if (opts.given("cluster")) {
      const std::string path = opts.str("cluster");
      std::ifstream in(path);
      WEFT_CHECK(in.good(), "cannot open the --cluster file {}: pass a JSON cluster description",
                 path);
      std::stringstream text;
      text << in.rdbuf();
      machine = plan::parse_cluster(text.str(), path);
    } else {
      machine = plan::default_gpu_cluster();
    }
  } else {
    machine = plan::cpu_machine(w.compute, req.world);
  }

  if (opts.given("evaluate")) {
    const plan::MemoryModel memory(w);
    const plan::PlannedLayout p{.layout = evaluated,
                                .memory = memory.peak(evaluated),
                                .cost = plan::predict_step(w, evaluated, machine)};
    if (json) {
      bench::print_json(to_json(p, gpu));
    } else {
      std::printf("%s, %lld layers, width %lld, context %lld, %s; %s\n", shape.preset.c_str(),
                  static_cast<long long>(w.model.layers), static_cast<long long>(w.model.width),
                  static_cast<long long>(w.model.seq), std::string(dtype_name(w.compute)).c_str(),
                  machine.description.c_str());
      print_evaluation(p, gpu);
    }
    if (req.memory_limit > 0 && p.memory.total() > req.memory_limit) {
      WEFT_FAIL("this layout needs {} per rank, above --memory-limit {}",
                plan::format_bytes(p.memory.total()), opts.str("memory-limit"));
    }
    return 0;
  }

  const plan::PlanResult r = plan::plan_layouts(req, machine);
  if (r.fits.empty()) {
    WEFT_FAIL(
        "no layout of {} ranks fits --memory-limit {}: the smallest needs {} per rank "
        "(weft train {}); raise the limit, add ranks or shrink the model",
        req.world, opts.str("memory-limit"), plan::format_bytes(r.smallest.memory.total()),
        r.smallest.layout.text());
  }
  if (json) {
    for (size_t i = 0; i < r.fits.size() && i < static_cast<size_t>(top); ++i)
      bench::print_json(to_json(r.fits[i], gpu));
    return 0;
  }
  std::printf("%s, %lld layers, width %lld, context %lld, %s, %d ranks, global batch %lld; %s\n",
              shape.preset.c_str(), static_cast<long long>(w.model.layers),
              static_cast<long long>(w.model.width), static_cast<long long>(w.model.seq),
              std::string(dtype_name(w.compute)).c_str(), req.world,
              static_cast<long long>(req.global_batch), machine.description.c_str());
  std::printf("%zu layouts considered, %zu within %s\n", r.considered, r.fits.size(),
              req.memory_limit > 0 ? opts.str("memory-limit").c_str() : "no memory limit");
  print_table(r.fits, static_cast<size_t>(top), gpu);
  return 0;
}

const cli::Register reg("plan", "rank the layouts a world allows by predicted speed and memory",
                        plan_options, plan_command);

}  // namespace
}  // namespace weft
