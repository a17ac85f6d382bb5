// weft bench overlap: for one GEMM shape and each comm-GEMM overlap algorithm,
// the GEMM alone, the collective alone, the two in sequence (overlap off) and
// overlapped, and the hidden fraction (sequential - overlapped) / min(GEMM,
// collective). --layer: a whole TransformerLayer forward + backward with
// overlap off and on. Ranks are threads (local backend) or, under mpirun,
// processes (e.g. across the hosts of scripts/netns-cluster.sh).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "../cli.h"
#include "timing.h"
#include "weft/comm/local.h"
#include "weft/comm/world.h"
#include "weft/core/threads.h"
#include "weft/io/json.h"
#include "weft/kernels/gemm.h"
#include "weft/nn/linear.h"
#include "weft/nn/transformer_layer.h"
#include "weft/parallel/mappings.h"
#include "weft/parallel/schedule.h"

namespace weft {
namespace {

using parallel::OverlapChoice;
using parallel::OverlapMethod;
using parallel::Schedule;

struct Setup {
  int64_t width, tokens, heads;
  DType dtype;
  int splits, threads, warmup, iters;
  int comm_cores = 0;
};

// Seconds of `fn` on the slowest rank of `g`.
class Timer {
 public:
  explicit Timer(comm::ProcessGroup& g) : g_(g) {}
  double once(const std::function<void()>& fn) { return bench::slowest_rank_seconds(g_, fn); }
  // A measurement of `fn` for bench::alternate.
  std::function<double()> of(std::function<void()> fn) {
    return [this, fn = std::move(fn)] { return once(fn); };
  }

 private:
  comm::ProcessGroup& g_;
};

struct Row {
  std::string name;
  double gemm = 0, comm = 0, off = 0, on = 0;
  double hidden() const {
    const double m = std::min(gemm, comm);
    return m > 0 ? (off - on) / m : 0.0;
  }
};

// The four timings of one algorithm, the off and on runs alternating.
Row measure(Timer& timer, const Setup& s, const std::string& name,
            const std::function<void()>& gemm, const std::function<void()>& comm_only,
            const std::function<void()>& off, const std::function<void()>& on) {
  for (int i = 0; i < s.warmup; ++i) {
    gemm();
    comm_only();
    off();
    on();
  }
  // Each round: the GEMM, the collective, then off and on (on first every
  // other round).
  std::vector<double> g, c;
  const auto fo =
      bench::alternate(s.iters, {timer.of(off), timer.of(on)}, bench::Order::rotating, [&] {
        g.push_back(timer.once(gemm));
        c.push_back(timer.once(comm_only));
      });
  using bench::upper_median;
  return {name, upper_median(g), upper_median(c), upper_median(fo[0]), upper_median(fo[1])};
}

// A call of `schedule` on a, w -> out with overlap `o`, as a timed body.
std::function<void()> scheduled(comm::ProcessGroup& world, Schedule schedule, const char* name,
                                const Tensor& a, const Tensor& w, const Tensor& out,
                                parallel::GemmWorkspace& ws, OverlapChoice o) {
  return [&world, schedule, name, &a, &w, &out, &ws, o] {
    parallel::scheduled_gemm(ExecContext::host(),
                             {.schedule = schedule,
                              .group = &world,
                              .options = {.trans_b = true},
                              .overlap = o,
                              .name = name},
                             a, w, out, ws);
  };
}

// A sequence-parallel context over `world` with overlap `config`.
parallel::ContextPtr context(comm::ProcessGroup& world, const Setup& s, const char* config) {
  auto pc = std::make_shared<parallel::ParallelContext>();
  pc->tp = std::shared_ptr<comm::ProcessGroup>(&world, [](comm::ProcessGroup*) {});
  pc->sp = nn::SequenceParallel::seq;
  pc->precision = parallel::Precision::of(s.dtype);
  pc->overlap = parallel::OverlapConfig::parse(config);
  pc->overlap.set_comm_cores(s.comm_cores);
  return pc;
}

// qkv backward under SP: the input re-gather beside dgrad, the dgrad
// reduce-scatter beside wgrad (bulk) against both on their own (off).
Row bulk_row(comm::ProcessGroup& world, const Setup& s, Timer& timer) {
  const ExecContext& ec = ExecContext::host();
  const int64_t p = world.size(), c = s.width, n = s.tokens;
  auto make = [&](const char* config) {
    return std::make_unique<nn::Linear>(context(world, s, config),
                                        nn::LinearConfig{.name = "qkv",
                                                         .in = c,
                                                         .out = 3 * c,
                                                         .mode = nn::Parallel::column,
                                                         .overlap_name = "qkv"});
  };
  auto bulk = make("qkv_dgrad=bulk,qkv_wgrad=bulk");
  auto off = make("qkv_dgrad=off,qkv_wgrad=off");
  const Tensor x = Tensor::full({n / p, c}, 0.5f, s.dtype);
  const Tensor dy = Tensor::full({n, 3 * c / p}, 0.01f, s.dtype);
  auto backward = [&](nn::Linear& lin) {
    return [&] {
      nn::Ctx ctx;
      lin.forward(ctx, x);
      lin.backward(ctx, dy);
    };
  };
  auto forward = [&](nn::Linear& lin) {
    return [&] {
      nn::Ctx ctx;
      lin.forward(ctx, x);
    };
  };
  Tensor full = Tensor::full({n, c}, 0.5f, s.dtype), dx = Tensor::empty({n, c}, s.dtype);
  Tensor wgrad = Tensor::zeros({3 * c / p, c});
  Tensor gathered = Tensor::empty({n, c}, s.dtype), mine = Tensor::empty({n / p, c}, s.dtype);
  const Tensor w = Tensor::full({3 * c / p, c}, 0.01f, s.dtype);
  Row r = measure(
      timer, s, "bulk: re-gather || dgrad, reduce-scatter || wgrad (qkv bwd)",
      [&] {
        kernels::gemm(ec, dy, w, dx);
        kernels::gemm(ec, dy, full, wgrad, {.trans_a = true, .accumulate = true});
      },
      [&] {
        world.all_gather(gathered, x).wait();
        world.reduce_scatter(mine, dx).wait();
      },
      backward(*off), backward(*bulk));
  // Forward + backward were timed: take the forward (the same in both) out.
  const double f = bench::upper_median(bench::alternate(s.iters, {timer.of(forward(*off))})[0]);
  r.off -= f;
  r.on -= f;
  return r;
}

std::vector<Row> run_gemms(comm::ProcessGroup& world, const Setup& s) {
  set_num_threads(s.threads);
  const ExecContext& ec = ExecContext::host();
  const int64_t p = world.size(), c = s.width, n = s.tokens;
  Timer timer(world);
  std::vector<Row> rows;
  parallel::GemmWorkspace ws;
  // qkv forward: this rank's tokens gathered, times the rank's 3C/P rows of W.
  {
    const Tensor a = Tensor::full({n / p, c}, 0.5f, s.dtype);
    const Tensor w = Tensor::full({3 * c / p, c}, 0.01f, s.dtype);
    Tensor full = Tensor::full({n, c}, 0.5f, s.dtype), out = Tensor::empty({n, 3 * c / p}, s.dtype);
    Tensor gathered = Tensor::empty({n, c}, s.dtype);
    auto sched = [&](OverlapChoice o) {
      return scheduled(world, Schedule::all_gather_gemm, "qkv_fprop", a, w, out, ws, o);
    };
    rows.push_back(measure(
        timer, s, "ring all-gather + GEMM (qkv fprop)",
        [&] { kernels::gemm(ec, full, w, out, {.trans_b = true}); },
        [&] { world.all_gather(gathered, a).wait(); }, sched({}),
        sched({OverlapMethod::ring, 1, s.comm_cores})));
  }
  // fc2 forward: every token, the rank's 4C/P features, reduce-scattered.
  {
    const Tensor a = Tensor::full({n, 4 * c / p}, 0.5f, s.dtype);
    const Tensor w = Tensor::full({c, 4 * c / p}, 0.01f, s.dtype);
    Tensor partial = Tensor::empty({n, c}, s.dtype), out = Tensor::empty({n / p, c}, s.dtype);
    auto sched = [&](OverlapChoice o) {
      return scheduled(world, Schedule::gemm_reduce_scatter, "fc2_fprop", a, w, out, ws, o);
    };
    auto gemm = [&] { kernels::gemm(ec, a, w, partial, {.trans_b = true}); };
    auto rs = [&] { world.reduce_scatter(out, partial).wait(); };
    rows.push_back(measure(timer, s, "ring GEMM + reduce-scatter (fc2 fprop)", gemm, rs, sched({}),
                           sched({OverlapMethod::ring, 1, s.comm_cores})));
    rows.push_back(measure(timer, s, format("pipelined GEMM + reduce-scatter, {} splits", s.splits),
                           gemm, rs, sched({}),
                           sched({OverlapMethod::pipeline, s.splits, s.comm_cores})));
  }
  rows.push_back(bulk_row(world, s, timer));
  return rows;
}

struct LayerRow {
  double off = 0, on = 0;
};

LayerRow run_layer(comm::ProcessGroup& world, const Setup& s) {
  set_num_threads(s.threads);
  auto make = [&](const char* config) {
    return std::make_unique<nn::TransformerLayer>(
        context(world, s, config),
        nn::TransformerLayerConfig{.name = "h.0", .width = s.width, .heads = s.heads});
  };
  auto off = make("none"), on = make("on");
  const int64_t p = world.size();
  // One sequence of `tokens` positions, sequence-major: this rank's rows.
  const Tensor x = Tensor::full({s.tokens / p, 1, s.width}, 0.5f, s.dtype);
  const Tensor dy = Tensor::full(x.shape(), 0.01f, s.dtype);
  auto step = [&](nn::TransformerLayer& l) {
    return [&] {
      nn::Ctx ctx;
      l.forward(ctx, x);
      l.backward(ctx, dy);
    };
  };
  Timer timer(world);
  for (int i = 0; i < s.warmup; ++i) {
    step (*off)();
    step (*on)();
  }
  const auto fo = bench::alternate(s.iters, {timer.of(step(*off)), timer.of(step(*on))},
                                   bench::Order::rotating);
  return {bench::upper_median(fo[0]), bench::upper_median(fo[1])};
}

cli::Options run_options() {
  cli::Options opts(
      "weft bench overlap [options]",
      "Times each comm-GEMM overlap algorithm on one GEMM shape (GPT-2-small width,\n"
      "2048 tokens, TP = the number of ranks): the GEMM alone, the collective alone,\n"
      "the two in sequence (overlap off) and overlapped, and the hidden fraction\n"
      "(off - overlapped) / min(GEMM, collective). --layer times a whole\n"
      "TransformerLayer forward + backward (sequence parallelism) with every\n"
      "collective on its own (overlap none) and with Transformer Engine's defaults (on). Medians "
      "of --iters runs, the off and\n"
      "on runs alternating; times are the slowest rank's. Ranks are threads (local\n"
      "backend, --tp of them) or, under mpirun, processes.");
  opts.option("tp", "N", "2", "ranks on the local backend (under mpirun: the world)")
      .option("width", "C", "768", "model width")
      .option("heads", "H", "12", "attention heads (--layer)")
      .option("tokens", "N", "2048", "tokens (rows) of the GEMM")
      .option("dtype", "f32|bf16", "f32", "compute dtype")
      .option("splits", "N", "4", "pipeline chunks")
      .option("threads", "N", "1", "GEMM threads per rank")
      .option("comm-cores", "N", "0",
              "threads an overlapped GEMM leaves to the transfers (the overlap option comm_cores)")
      .option("warmup", "N", "1", "untimed runs")
      .option("iters", "N", "5", "timed runs")
      .flag("layer", "time a TransformerLayer forward + backward with overlap off and on")
      .flag("json", "print one JSON object per row");
  return opts;
}

void print_layer(const LayerRow& lr, const Setup& s, int tp, const char* backend, bool json) {
  if (json) {
    io::Json j = io::Json::object();
    j["run"] = "layer";
    j["tp"] = tp;
    j["backend"] = backend;
    j["tokens"] = s.tokens;
    j["off_ms"] = lr.off * 1e3;
    j["on_ms"] = lr.on * 1e3;
    j["ratio"] = lr.on / lr.off;
    j["threads"] = s.threads;
    j["comm_cores"] = s.comm_cores;
    bench::print_json(j);
  } else {
    std::printf(
        "TransformerLayer C=%lld, %lld tokens, sp seq, tp %d, %s, %d thread(s) per rank, "
        "comm_cores %d, backend %s\n",
        static_cast<long long>(s.width), static_cast<long long>(s.tokens), tp,
        std::string(dtype_name(s.dtype)).c_str(), s.threads, s.comm_cores, backend);
    std::printf("fwd+bwd, overlap off %9.2f ms\nfwd+bwd, overlap on  %9.2f ms\non/off %.3f\n",
                lr.off * 1e3, lr.on * 1e3, lr.on / lr.off);
  }
}

void print_gemms(const std::vector<Row>& rows, const Setup& s, int tp, const char* backend,
                 bool json) {
  if (!json) {
    std::printf(
        "GEMMs of C=%lld, %lld tokens, tp %d, %s, %d thread(s) per rank, comm_cores %d, backend "
        "%s\n",
        static_cast<long long>(s.width), static_cast<long long>(s.tokens), tp,
        std::string(dtype_name(s.dtype)).c_str(), s.threads, s.comm_cores, backend);
    std::printf("%-58s %9s %9s %9s %9s %7s\n", "algorithm", "gemm ms", "comm ms", "off ms",
                "overlap", "hidden");
  }
  for (const Row& r : rows) {
    if (json) {
      io::Json j = io::Json::object();
      j["algorithm"] = r.name;
      j["tp"] = tp;
      j["backend"] = backend;
      j["gemm_ms"] = r.gemm * 1e3;
      j["comm_ms"] = r.comm * 1e3;
      j["off_ms"] = r.off * 1e3;
      j["overlap_ms"] = r.on * 1e3;
      j["hidden"] = r.hidden();
      j["threads"] = s.threads;
      j["comm_cores"] = s.comm_cores;
      bench::print_json(j);
    } else {
      std::printf("%-58s %9.2f %9.2f %9.2f %9.2f %6.0f%%\n", r.name.c_str(), r.gemm * 1e3,
                  r.comm * 1e3, r.off * 1e3, r.on * 1e3, 100 * r.hidden());
    }
  }
}

int run(const std::vector<std::string>& args) {
  cli::Options opts = run_options();
  opts.parse(args);
  const Setup s{opts.integer("width"),
                opts.integer("tokens"),
                opts.integer("heads"),
                parse_dtype(opts.choice("dtype", {"f32", "bf16"})),
                static_cast<int>(opts.integer("splits")),
                static_cast<int>(opts.integer("threads")),
                static_cast<int>(opts.integer("warmup")),
                static_cast<int>(opts.integer("iters")),
                static_cast<int>(opts.integer("comm-cores"))};
  const bool mpi = comm::launched_by_mpi();
  const int tp = mpi ? comm::launcher_world_size() : static_cast<int>(opts.integer("tp"));
  WEFT_CHECK(tp >= 2, "bench overlap needs at least 2 ranks (--tp, or mpirun -np)");
  WEFT_CHECK(s.tokens % tp == 0 && s.width % tp == 0 && s.heads % tp == 0,
             "--tokens {}, --width {} and --heads {} must be multiples of the {} ranks", s.tokens,
             s.width, s.heads, tp);
  WEFT_CHECK(s.iters >= 1 && s.warmup >= 0 && s.threads >= 1 && s.splits >= 1,
             "--iters, --threads and --splits must be positive");
  WEFT_CHECK(s.comm_cores >= 0 && s.comm_cores <= 1024, "--comm-cores {} must be in [0, 1024]",
             s.comm_cores);
  const bool layer = opts.flag_set("layer"), json = opts.flag_set("json");
  std::vector<Row> rows;
  LayerRow lr;
  int rank = 0;
  auto body = [&](comm::ProcessGroup& world) {
    std::vector<Row> r;
    LayerRow l;
    if (layer) {
      l = run_layer(world, s);
    } else {
      r = run_gemms(world, s);
    }
    if (world.rank() == 0) {
      rows = r;
      lr = l;
    }
    rank = world.rank();
  };
  if (mpi) {
    comm::run_world(tp, body);
    if (rank != 0) return 0;
  } else {
    comm::run_local(tp, body);
  }
  const char* backend = mpi ? "mpi" : "local";
  if (layer) {
    print_layer(lr, s, tp, backend, json);
  } else {
    print_gemms(rows, s, tp, backend, json);
  }
  return 0;
}

cli::Register reg(
    "bench overlap",
    "time each comm-GEMM overlap algorithm: GEMM, collective, off, overlapped, hidden", run_options,
    run);

}  // namespace
}  // namespace weft
