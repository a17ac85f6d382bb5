// weft bench step: one training step of a GPT, timed phase by phase, against
// the same step at TP=1 measured in the same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <thread>

#include "../cli.h"
#include "direct_gemm.h"
#include "synthetic_data.h"
#include "timing.h"
#include "weft/comm/world.h"
#include "weft/core/cuda.h"
#include "weft/core/memory.h"
#include "weft/core/threads.h"
#include "weft/io/json.h"
#include "weft/plan/memory_model.h"
#include "weft/train/plan_layout.h"
#include "weft/train/trainer.h"

namespace weft {
namespace {

struct Measured {
  std::string label;
  int tp = 1, cp = 1, ep = 1, gtp = 1, dp = 1, pp = 1;
  train::StepTimes mean{};  // rank 0's, per step
  double tokens_per_s = 0;
  double flops_per_token = 0;
  int64_t peak_bytes = 0;  // largest rank
  std::vector<int64_t> peak_bytes_per_rank;
  int64_t optimizer_state_bytes = 0;  // rank 0's
  int64_t predicted_peak_bytes = 0;   // the memory model's largest rank
  double llmc_flops_per_token = 0;
  std::vector<cuda::KernelTime> kernels;  // per kernel over the timed steps (--profile)
  // MoE: tokens per expert of each MoE layer in the last step, all data ranks.
  std::vector<std::vector<int64_t>> expert_load;
  // Times the host waited for the GPU per timed step (cuda::host_syncs).
  double host_syncs_per_step = 0;
  // CPU: the direct oneDNN rate of the model's layer GEMMs (GFLOP/s), probed
  // after every timed step and taken, as the step time is, as the median.
  double gemm_gflops = 0;
  // Context parallelism: for each rank of world rank 0's cp group (in cp
  // rank order), its attention time per step, and the share of attention
  // time spent waiting for the exchange (the mean over those ranks).
  std::vector<double> attention_s_per_cp_rank;
  double cp_exposed = 0;
};

// This rank's optimizer state: AdamW's two moments (the memory tracker's
// optimizer bytes; sharded under --distributed-optimizer) and the f32 master
// weights they update. weft's f32 parameters are the master weights (the
// GEMMs read casts of them), and every rank keeps them whole, with or without
// the distributed optimizer. Call on the rank's thread.
int64_t optimizer_state_bytes(train::Trainer& t) {
  int64_t bytes =
      MemoryTracker::current().tag(t.model().context()->exec.device(), MemoryTag::optimizer).live;
  for (const nn::Parameter* p : t.model().parameters()) {
    if (p->value.dtype() == DType::f32) bytes += p->value.nbytes();
  }
  return bytes;
}

// Context parallelism's per-rank numbers, gathered from the rank threads:
// `times` is this rank's attention times over `steps` steps.
void record_cp_rank(Measured& m, const train::Trainer& t, int world_rank,
                    const parallel::context::AttentionTimes& times, int steps) {
  const comm::GridLayout& layout = t.grid().layout();
  if (!layout.has("cp")) return;
  const std::vector<int> group = layout.group_of("cp", 0);
  const auto at = std::find(group.begin(), group.end(), world_rank);
  if (at == group.end()) return;
  const auto r = static_cast<size_t>(at - group.begin());
  m.attention_s_per_cp_rank.resize(group.size());
  m.attention_s_per_cp_rank[r] = times.attention_s / steps;
  if (times.attention_s > 0) {
    m.cp_exposed += times.wait_s / times.attention_s / static_cast<double>(group.size());
  }
}

// The parameters a token's computation uses: a MoE layer's experts count
// top_k / experts of theirs (its active parameters). Under expert
// parallelism this rank holds 1/ep of every layer's experts.
int64_t active_parameters(train::Trainer& t) {
  const nn::GptConfig& m = t.config().model;
  double n = 0;
  // Under --pp every stage's parameters (a MoE model's experts all counted).
  if (t.pipelined()) return t.num_parameters_global();
  for (const nn::Parameter* p : t.model().parameters()) {
    const auto whole = static_cast<double>(p->spec.global_shape.numel());
    if (p->name.find(".experts.") == std::string::npos) {
      n += whole;
    } else {
      n += whole * t.config().ep * static_cast<double>(m.moe_top_k) /
           static_cast<double>(m.moe_experts);
    }
  }
  return static_cast<int64_t>(n);
}

// 6 FLOPs per parameter per token (forward 2, backward 4) for the GEMMs, plus
// the attention scores and weighted sums (2·2·T·C per layer forward, ×3).
double flops_per_token(const train::TrainConfig& c, int64_t params) {
  const double wpe = static_cast<double>(c.model.seq * c.model.width);
  return 6.0 * (static_cast<double>(params) - wpe) +
         12.0 * static_cast<double>(c.model.layers * c.model.seq * c.model.width);
}

// llm.c's count for its MFU: 6 FLOPs per parameter per token, wpe included,
// plus 6·L·C·T for attention.
double llmc_flops_per_token(const train::TrainConfig& c, int64_t params) {
  return 6.0 * static_cast<double>(params) +
         6.0 * static_cast<double>(c.model.layers * c.model.width * c.model.seq);
}

// The dense peak of the GPU's tensor cores (bf16) or CUDA cores (f32), in
// TFLOP/s, from NVIDIA's data sheets: H100 SXM and H200 989.4 bf16 / 66.9 f32,
// H100 PCIe 756 / 51.2; 0 for a GPU not in the list (pass --peak-tflops).
double gpu_peak_tflops(const std::string& description, DType dtype) {
  const bool bf16 = dtype == DType::bf16;
  if (description.find("H100 PCIe") != std::string::npos) return bf16 ? 756.0 : 51.2;
  if (description.find("H100") != std::string::npos ||
      description.find("H200") != std::string::npos) {
    return bf16 ? 989.4 : 66.9;
  }
  return 0.0;
}

Measured measure(train::TrainConfig cfg, int warmup, int steps, bool profile = false) {
  Measured m;
  m.tp = cfg.tp;
  m.cp = cfg.cp;
  m.ep = cfg.ep;
  m.gtp = cfg.gtp;
  m.dp = cfg.dp ? cfg.dp : 1;
  m.pp = cfg.pp;
  m.predicted_peak_bytes =
      plan::MemoryModel(train::plan_workload(cfg)).peak(train::plan_layout(cfg)).total();
  const io::Dataset data = synthetic_data(cfg);
  std::mutex mu;
  comm::run_world(m.tp * m.cp * m.ep * m.gtp * m.dp * m.pp, [&](comm::ProcessGroup& world) {
    train::Trainer t(cfg, world, data);
    for (int i = 0; i < warmup; ++i) t.step();
    parallel::context::AttentionTimes& cp_times = *t.model().context()->cp_times;
    cp_times = {};
    if (profile) {
      cuda::reset_kernel_profile();
      cuda::set_kernel_profiling(true);
    }
    // The limit's yardstick, alternated with the steps (rank 0 on every core
    // while the other ranks wait), so that a busy spell of a shared machine
    // slows both alike.
    const bool probe_gemms = !Device::parse(cfg.device).is_cuda();
    // The probe's buffers are no part of the rank's memory.
    MemoryTracker probe_memory;
    std::unique_ptr<LayerGemmProbe> probe;
    std::vector<double> probe_s, step_s;
    auto on_all_cores = [&](auto&& fn) {
      const int before = num_threads();
      set_num_threads(available_cores());
      fn();
      set_num_threads(before);
    };
    if (probe_gemms && world.rank() == 0) {
      on_all_cores([&] {
        const ScopedMemoryTracker scope(probe_memory);
        probe = std::make_unique<LayerGemmProbe>(cfg.compute_dtype(),
                                                 cfg.micro_batch * cfg.model.seq, cfg.model.width);
      });
    }
    const int64_t syncs_before = cuda::host_syncs();
    train::StepTimes sum;
    int64_t tokens = 0;
    for (int i = 0; i < steps; ++i) {
      if (probe_gemms) {
        world.barrier().wait();
        if (probe) {
          on_all_cores([&] { probe_s.push_back(probe->seconds()); });
          world.barrier().wait();
        } else {
          // The other ranks wait for the probe asleep: a rank thread spinning
          // in the barrier would take a core from it (the limit would halve).
          comm::Work w = world.barrier();
          while (!w.is_completed()) std::this_thread::sleep_for(std::chrono::microseconds(200));
          w.wait();
        }
      }
      train::StepResult r = t.step();
      step_s.push_back(r.times.total);
      sum.forward += r.times.forward;
      sum.backward += r.times.backward;
      sum.optimizer += r.times.optimizer;
      sum.comm += r.times.comm;
      sum.gemm += r.times.gemm;
      sum.all_to_all += r.times.all_to_all;
      sum.total += r.times.total;
      tokens += r.tokens;
    }
    const int64_t syncs = cuda::host_syncs() - syncs_before;
    if (profile) {
      cuda::set_kernel_profiling(false);
      m.kernels = cuda::kernel_profile();
    }
    std::vector<int64_t> peaks = t.peak_memory();
    std::vector<std::vector<int64_t>> load = t.expert_load();
    const int64_t params = active_parameters(t);
    const int64_t optimizer_bytes = optimizer_state_bytes(t);
    std::lock_guard<std::mutex> lock(mu);
    record_cp_rank(m, t, world.rank(), cp_times, steps);
    if (world.rank() != 0) return;
    m.optimizer_state_bytes = optimizer_bytes;
    m.peak_bytes_per_rank = peaks;
    const double n = steps;
    m.mean = {.forward = sum.forward / n,
              .backward = sum.backward / n,
              .optimizer = sum.optimizer / n,
              .comm = sum.comm / n,
              .gemm = sum.gemm / n,
              .all_to_all = sum.all_to_all / n,
              .total = sum.total / n};
    m.expert_load = std::move(load);
    // Every rank thread counts into the process's total (in a process of
    // its own, a rank counts alone).
    m.host_syncs_per_step = static_cast<double>(syncs) / n /
                            (comm::launched_by_mpi() ? 1.0 : static_cast<double>(world.size()));
    // The median step against the median probe: like statistics of both.
    m.tokens_per_s = static_cast<double>(tokens) / n / bench::median(step_s);
    if (probe) m.gemm_gflops = probe->flops() / bench::median(probe_s) / 1e9;
    m.flops_per_token = flops_per_token(cfg, params);
    m.llmc_flops_per_token = llmc_flops_per_token(cfg, params);
    m.peak_bytes = *std::max_element(peaks.begin(), peaks.end());
  });
  return m;
}

// The limit: the tokens/s a step would reach if every model FLOP ran at the
// direct oneDNN GEMM rate (r.gemm_gflops, the whole machine's, probed between
// the row's steps); utilization is the measured tokens/s over it.
double limit_tokens_per_s(const Measured& r) { return r.gemm_gflops * 1e9 / r.flops_per_token; }

void print_table(const std::vector<Measured>& rows, const Measured& base) {
  std::printf("%-18s %10s %9s %9s %9s %9s %9s %9s %8s %9s %8s %10s %6s\n", "layout", "tokens/s",
              "step ms", "fwd ms", "bwd ms", "optim ms", "comm ms", "gemm ms", "GFLOP/s",
              "peak MiB", "vs base", "limit", "util");
  for (const Measured& r : rows) {
    const double limit = limit_tokens_per_s(r);
    std::printf(
        "%-18s %10.0f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %8.1f %9.1f %7.2fx %10.0f %5.0f%%\n",
        r.label.c_str(), r.tokens_per_s, 1e3 * r.mean.total, 1e3 * r.mean.forward,
        1e3 * r.mean.backward, 1e3 * r.mean.optimizer, 1e3 * r.mean.comm, 1e3 * r.mean.gemm,
        r.tokens_per_s * r.flops_per_token / 1e9, static_cast<double>(r.peak_bytes) / (1 << 20),
        r.tokens_per_s / base.tokens_per_s, limit, 100 * r.tokens_per_s / limit);
  }
}

// The busiest and idlest expert of any MoE layer, and the busiest against an
// even share of its layer's tokens.
struct LoadBalance {
  int64_t min = 0, max = 0;
  double max_over_even = 0;
};
LoadBalance load_balance(const std::vector<std::vector<int64_t>>& load) {
  LoadBalance b{.min = INT64_MAX};
  for (const std::vector<int64_t>& layer : load) {
    int64_t total = 0;
    for (int64_t c : layer) {
      total += c;
      b.min = std::min(b.min, c);
      b.max = std::max(b.max, c);
    }
    const double even = static_cast<double>(total) / static_cast<double>(layer.size());
    if (even > 0) b.max_over_even = std::max(b.max_over_even, static_cast<double>(b.max) / even);
  }
  return b;
}

// MoE models: the expert-parallel exchange's share of the step and the load.
void print_moe_table(const std::vector<Measured>& rows) {
  std::printf("\n%-18s %9s %9s %12s %12s %9s\n", "layout", "a2a ms", "a2a share", "tokens/exp min",
              "tokens/exp max", "max/even");
  for (const Measured& r : rows) {
    const LoadBalance b = load_balance(r.expert_load);
    std::printf("%-18s %9.2f %8.1f%% %14lld %14lld %8.2fx\n", r.label.c_str(),
                1e3 * r.mean.all_to_all, 100 * r.mean.all_to_all / r.mean.total,
                static_cast<long long>(b.min), static_cast<long long>(b.max), b.max_over_even);
  }
  std::printf(
      "(tokens per expert: the last timed step, every MoE layer, all data ranks; a2a: the\n"
      " all_to_all token exchange of expert parallelism, waits included)\n");
}

// On a GPU the yardstick is the data sheet's peak: MFU as llm.c reports it,
// model FLOPs per second (llm.c's count) over the dense peak.
// Where the GPU's time went (--profile): each kernel's share of the step.
void print_kernel_table(const Measured& r, int steps) {
  double total = 0;
  for (const cuda::KernelTime& k : r.kernels) total += k.ms;
  std::printf(
      "\n%s: GPU time per step by kernel (%.2f ms in kernels of a %.2f ms step; %.1f host "
      "synchronizations per step and rank)\n",
      r.label.c_str(), total / steps, 1e3 * r.mean.total, r.host_syncs_per_step);
  std::printf("%-32s %9s %10s %7s\n", "kernel", "calls", "ms", "share");
  for (const cuda::KernelTime& k : r.kernels) {
    std::printf("%-32s %9.1f %10.3f %6.1f%%\n", k.name.c_str(),
                static_cast<double>(k.calls) / steps, k.ms / steps,
                100 * k.ms / steps / (1e3 * r.mean.total));
  }
}

void print_gpu_table(const std::vector<Measured>& rows, double peak_tflops) {
  std::printf("%-18s %10s %9s %9s %9s %9s %9s %9s %7s\n", "layout", "tokens/s", "step ms", "fwd ms",
              "bwd ms", "optim ms", "TFLOP/s", "peak MiB", "MFU");
  for (const Measured& r : rows) {
    const double tflops = r.tokens_per_s * r.llmc_flops_per_token / 1e12;
    std::printf("%-18s %10.0f %9.2f %9.2f %9.2f %9.2f %9.1f %9.1f %6.1f%%\n", r.label.c_str(),
                r.tokens_per_s, 1e3 * r.mean.total, 1e3 * r.mean.forward, 1e3 * r.mean.backward,
                1e3 * r.mean.optimizer, tflops, static_cast<double>(r.peak_bytes) / (1 << 20),
                peak_tflops > 0 ? 100 * tflops / peak_tflops : 0.0);
  }
}

// Memory: each rank's measured peak, the memory model's prediction of the
// largest, rank 0's optimizer state.
void add_memory_json(io::Json& j, const Measured& r) {
  io::Json peaks = io::Json::array();
  for (int64_t p : r.peak_bytes_per_rank) peaks.push_back(p);
  j["peak_memory_bytes_per_rank"] = std::move(peaks);
  j["predicted_peak_bytes"] = r.predicted_peak_bytes;
  j["optimizer_state_bytes"] = r.optimizer_state_bytes;
}

io::Json to_json(const Measured& r, const Measured& base) {
  io::Json j = io::Json::object();
  j["layout"] = r.label;
  j["tp"] = r.tp;
  j["gtp"] = r.gtp;
  if (r.pp > 1) j["pp"] = r.pp;
  j["dp"] = r.dp;
  j["tokens_per_s"] = r.tokens_per_s;
  j["step_s"] = r.mean.total;
  j["forward_s"] = r.mean.forward;
  j["backward_s"] = r.mean.backward;
  j["optimizer_s"] = r.mean.optimizer;
  j["comm_s"] = r.mean.comm;
  j["gemm_s"] = r.mean.gemm;
  j["ep"] = r.ep;
  if (!r.expert_load.empty()) {
    const LoadBalance b = load_balance(r.expert_load);
    j["all_to_all_s"] = r.mean.all_to_all;
    j["all_to_all_share"] = r.mean.all_to_all / r.mean.total;
    j["tokens_per_expert_min"] = b.min;
    j["tokens_per_expert_max"] = b.max;
    j["expert_max_over_even"] = b.max_over_even;
  }
  j["gflops"] = r.tokens_per_s * r.flops_per_token / 1e9;
  j["peak_memory_bytes"] = r.peak_bytes;
  add_memory_json(j, r);
  if (r.cp > 1) {
    j["cp"] = r.cp;
    io::Json attention = io::Json::array();
    for (double t : r.attention_s_per_cp_rank) attention.push_back(t);
    j["attention_s_per_rank"] = std::move(attention);
    j["cp_exposed"] = r.cp_exposed;
  }
  j["vs_baseline"] = r.tokens_per_s / base.tokens_per_s;
  j["direct_gemm_gflops"] = r.gemm_gflops;
  j["limit_tokens_per_s"] = limit_tokens_per_s(r);
  j["utilization"] = r.tokens_per_s / limit_tokens_per_s(r);
  return j;
}

cli::Options bench_step_options() {
  cli::Options opts(
      "weft bench step [options]",
      "Times training steps of a GPT on random tokens (local backend: ranks are threads\n"
      "sharing this machine's cores) and breaks a step down into forward, backward\n"
      "(with the data-parallel gradient sync), optimizer (loss/norm reductions and AdamW),\n"
      "and the time spent waiting for collectives (comm) and in GEMMs (gemm), which\n"
      "overlap the phases. The baseline, measured in the same run, is TP=1 x DP=1 with\n"
      "the same global batch on all cores. \"limit\" is the tokens/s the step would reach\n"
      "if every model FLOP (6N + attention, as llm.c counts them) ran at the direct oneDNN\n"
      "rate of the model's layer GEMMs (micro-batch x context rows, all cores), probed\n"
      "before every timed step; \"util\" is the median step's tokens/s over the limit of\n"
      "the median probe.");
  opts.option("preset", "NAME", "tiny",
              "model preset: tiny, gpt2-124m, gpt2-350m, llama-tiny, llama-1b or moe-tiny")
      .option("tp", "N", "2", "tensor-parallel size")
      .option("cp", "N", "1",
              "context-parallel size (each sequence split over N ranks; --json adds each cp "
              "rank's peak memory and attention time and cp_exposed, the share of attention "
              "time spent waiting for the exchange)")
      .option("cp-comm", "p2p|allgather|a2a", "p2p", "context parallelism's attention exchange")
      .option("gtp", "N", "1",
              "generalized tensor-parallel size (weights sharded 1/N; its ranks take their own "
              "micro-batches, as data-parallel ranks do)")
      .option("ep", "N", "1",
              "expert-parallel size (MoE presets: experts split over N ranks, tokens exchanged by "
              "all_to_all; its ranks take their own micro-batches); MoE rows add the all_to_all "
              "share of the step and the experts' load")
      .option("dp", "N", "1", "data-parallel size")
      .option("pp", "N", "1",
              "pipeline-parallel size (stages of consecutive layers, as weft train --pp; the "
              "baseline runs the same micro-batches unpipelined)")
      .option("pp-schedule", "NAME", "1f1b", "pipeline schedule (as weft train --pp-schedule)")
      .option("vpp", "V", "1", "interleaved pipeline: virtual stages per rank")
      .option("sp", "off|seq|batch", "off", "sequence parallelism")
      .option("dtype", "f32|bf16", "f32", "compute type")
      .option("precision", "RECIPE", "f32",
              "f32, bf16, fp8-delayed, fp8-current, fp8-block, mxfp8 or nvfp4 (as weft train "
              "--precision; "
              "the quantized recipes are exact emulations on the CPU: their cost here is the "
              "emulation's, not an FP8 tensor core's)")
      .option("micro-batch", "B", "auto",
              "sequences per data-parallel rank (auto: 16 tiny and llama-tiny, 1 the others)")
      .option("grad-accum", "N", "1", "micro-batches accumulated per step")
      .option("global-batch", "N", "none",
              "sequences per step: the micro-batch becomes N / (data ranks x --grad-accum)")
      .option("seq", "T", "preset", "context length")
      .option("layers", "N", "preset", "transformer layers")
      .option("overlap", "CONFIG", "off",
              "comm-GEMM overlap (as weft train --overlap: on, a list or a JSON file); the same "
              "layout is also timed without it, in the same run")
      .option("device", "cpu|cuda|cuda:N", "cpu",
              "where the step runs; on a GPU (its TP/DP ranks share it as threads; --tp defaults "
              "to 1 there) the table reports MFU: model FLOPs as llm.c counts them (6N + 6LCT "
              "per token) over the GPU's dense peak")
      .option("peak-tflops", "X", "auto",
              "the GPU's dense peak in TFLOP/s for MFU (auto: from the data sheet of H100/H200)")
      .option("recompute", "none|selective|full", "none",
              "activation recomputation (as weft train --recompute)")
      .option("recompute-layers", "K", "all", "--recompute in the first K layers (0: all)")
      .option("steps", "N", "5", "timed steps")
      .option("warmup", "N", "1", "untimed steps first (primitive creation, first touch)")
      .flag("distributed-optimizer",
            "AdamW's moments sharded over the data-parallel ranks (as weft train; the "
            "baseline runs without it)")
      .flag("no-baseline", "skip the TP=1 x DP=1 baseline")
      .flag("profile",
            "on a GPU: time every kernel with CUDA events and print each one's share of the "
            "step (adds two event records per kernel; also WEFT_CUDA_PROFILE=1)")
      .flag("json", "print one JSON object per layout");
  return opts;
}

// The run's configuration from the options: `warmup` untimed steps, then `steps`.
train::TrainConfig step_config(const cli::Options& opts, bool on_gpu, int warmup, int steps) {
  train::TrainConfig cfg;
  io::Json s = io::Json::object();
  s["preset"] = opts.str("preset");
  for (const char* key : {"tp",     "cp",         "cp-comm",      "ep",        "gtp",
                          "dp",     "pp",         "pp-schedule",  "vpp",       "sp",
                          "dtype",  "precision",  "seq",          "layers",    "overlap",
                          "device", "grad-accum", "global-batch", "recompute", "recompute-layers"})
    if (opts.given(key)) s[key] = opts.str(key);
  const bool small = opts.str("preset") == "tiny" || opts.str("preset") == "llama-tiny" ||
                     opts.str("preset") == "moe-tiny";
  s["micro-batch"] = opts.given("micro-batch") ? opts.str("micro-batch") : small ? "16" : "1";
  if (!opts.given("tp")) s["tp"] = on_gpu ? "1" : "2";
  train::apply_settings(cfg, s, "");
  WEFT_CHECK(steps >= 1 && warmup >= 0, "--steps must be at least 1 and --warmup at least 0");
  cfg.steps = warmup + steps;
  cfg.warmup = 0;
  cfg.sample_tokens = 0;
  cfg.dp = std::max(cfg.dp, 1);
  cfg.distributed_optimizer = opts.flag_set("distributed-optimizer");
  train::apply_global_batch(cfg, cfg.ep * cfg.gtp * cfg.dp);
  train::validate(cfg);
  return cfg;
}

std::string layout_label(const train::TrainConfig& c) {
  std::string l = format("tp {}", c.tp);
  if (c.cp > 1) l += format(" x cp {} {}", c.cp, c.cp_comm);
  if (c.ep > 1) l += format(" x ep {}", c.ep);
  if (c.gtp > 1) l += format(" x gtp {}", c.gtp);
  l += format(" x dp {}", c.dp);
  if (c.pp > 1 || c.vpp > 1) {
    l += format(" x pp {} {}", c.pp, c.pp_schedule);
    if (c.vpp > 1) l += format(" vpp {}", c.vpp);
  }
  if (c.sp != nn::SequenceParallel::off) l += format(" sp {}", nn::sequence_parallel_name(c.sp));
  if (c.overlap != "off") l += " overlap";
  if (c.distributed_optimizer) l += " dopt";
  if (c.model.recompute != nn::Recompute::none) {
    l += format(" rc {}", nn::recompute_name(c.model.recompute));
  }
  return l;
}

// The rows: the TP=1 x DP=1 baseline (unless `no_baseline` or the layout is
// it), the layout without overlap (where it overlaps), and the layout.
std::vector<Measured> measure_rows(const train::TrainConfig& cfg, int warmup, int steps,
                                   bool no_baseline, bool profile) {
  std::vector<Measured> rows;
  const bool is_base = cfg.tp == 1 && cfg.cp == 1 && cfg.ep == 1 && cfg.gtp == 1 && cfg.dp == 1 &&
                       cfg.pp == 1 && cfg.vpp == 1;
  if (!is_base && !no_baseline) {
    train::TrainConfig base = cfg;
    base.tp = 1;
    base.sp = nn::SequenceParallel::off;
    base.overlap = "off";
    base.micro_batch = cfg.micro_batch * cfg.dp * cfg.ep * cfg.gtp;
    base.dp = 1;
    base.cp = 1;  // cp ranks share their sequences: the same global batch
    base.ep = 1;
    base.gtp = 1;
    base.distributed_optimizer = false;
    base.pp = 1;
    base.vpp = 1;
    rows.push_back(measure(base, warmup, steps));
    rows.back().label = layout_label(base) + " (base)";
  }
  if (cfg.overlap != "off") {
    train::TrainConfig plain = cfg;
    plain.overlap = "off";
    rows.push_back(measure(plain, warmup, steps));
    rows.back().label = layout_label(plain);
  }
  rows.push_back(measure(cfg, warmup, steps, profile));
  rows.back().label = layout_label(cfg) + (is_base ? " (base)" : "");
  return rows;
}

void print_gpu_rows(const std::vector<Measured>& rows, const train::TrainConfig& cfg,
                    const std::string& gpu, double peak_tflops, int steps, bool json) {
  if (!json) {
    print_gpu_table(rows, peak_tflops);
    if (!rows.back().kernels.empty()) print_kernel_table(rows.back(), steps);
    return;
  }
  for (const Measured& r : rows) {
    io::Json j = io::Json::object();
    j["layout"] = r.label;
    j["preset"] = cfg.preset;
    j["dtype"] = parallel::recipe_name(cfg.precision.recipe);
    j["device"] = cfg.device;
    j["gpu"] = gpu;
    j["tokens_per_s"] = r.tokens_per_s;
    j["step_s"] = r.mean.total;
    j["forward_s"] = r.mean.forward;
    j["backward_s"] = r.mean.backward;
    j["optimizer_s"] = r.mean.optimizer;
    j["peak_memory_bytes"] = r.peak_bytes;
    add_memory_json(j, r);
    j["tflops"] = r.tokens_per_s * r.llmc_flops_per_token / 1e12;
    j["peak_tflops"] = peak_tflops;
    j["mfu"] = peak_tflops > 0 ? r.tokens_per_s * r.llmc_flops_per_token / 1e12 / peak_tflops : 0.0;
    bench::print_json(j);
  }
}

void print_cpu_rows(const std::vector<Measured>& rows, const train::TrainConfig& cfg, bool json) {
  const Measured& base = rows.front();
  if (!json) {
    print_table(rows, base);
    if (!rows.back().expert_load.empty()) print_moe_table(rows);
    return;
  }
  for (const Measured& r : rows) {
    io::Json j = to_json(r, base);
    j["preset"] = cfg.preset;
    j["dtype"] = parallel::recipe_name(cfg.precision.recipe);
    bench::print_json(j);
  }
}

int bench_step(const std::vector<std::string>& args) {
  cli::Options opts = bench_step_options();
  opts.parse(args);
  WEFT_CHECK(!comm::launched_by_mpi(),
             "weft bench step runs its ranks as threads: start it without mpirun");
  const int steps = static_cast<int>(opts.integer("steps"));
  const int warmup = static_cast<int>(opts.integer("warmup"));
  const bool on_gpu = Device::parse(opts.str("device")).is_cuda();
  const train::TrainConfig cfg = step_config(opts, on_gpu, warmup, steps);
  WEFT_CHECK(!opts.flag_set("profile") || (cfg.tp * cfg.cp * cfg.gtp * cfg.dp == 1),
             "--profile times one rank's kernels (the profile is per process): use it with "
             "--tp 1 and no --dp or --gtp");
  double peak_tflops = 0;
  std::string gpu;
  if (on_gpu) {
    const Device device = Device::parse(cfg.device);
    cuda::check_device(device);
    gpu = cuda::device_description(device.index);
    peak_tflops = opts.given("peak-tflops") ? opts.number("peak-tflops")
                                            : gpu_peak_tflops(gpu, cfg.compute_dtype());
  }
  const bool json = opts.flag_set("json");
  if (!json) {
    std::printf(
        "%s, %s%s, %lld layers, width %lld, context %lld, micro-batch %lld per DP rank; "
        "%d cores\n",
        cfg.preset.c_str(), parallel::recipe_name(cfg.precision.recipe),
        cfg.precision.quantized()
            ? (" (" + std::string(dtype_name(cfg.compute_dtype())) + " activations)").c_str()
            : "",
        static_cast<long long>(cfg.model.layers), static_cast<long long>(cfg.model.width),
        static_cast<long long>(cfg.model.seq), static_cast<long long>(cfg.micro_batch),
        available_cores());
    if (cfg.precision.quantized()) {
      std::printf("GEMMs %s\n",
                  parallel::quantized_gemm_path(Device::parse(cfg.device), cfg.precision.recipe)
                      .text.c_str());
    }
    if (on_gpu) {
      std::printf("%s on %s; dense peak %s\n", cfg.device.c_str(), gpu.c_str(),
                  peak_tflops > 0 ? format("{:.1f} TFLOP/s", peak_tflops).c_str()
                                  : "unknown (pass --peak-tflops for MFU)");
    }
  }
  const std::vector<Measured> rows = measure_rows(cfg, warmup, steps, opts.flag_set("no-baseline"),
                                                  on_gpu && opts.flag_set("profile"));
  if (on_gpu) {
    print_gpu_rows(rows, cfg, gpu, peak_tflops, steps, json);
  } else {
    print_cpu_rows(rows, cfg, json);
  }
  return 0;
}

const cli::Register reg("bench step", "time a training step (forward, backward, optimizer, comm)",
                        bench_step_options, bench_step);

}  // namespace
}  // namespace weft
