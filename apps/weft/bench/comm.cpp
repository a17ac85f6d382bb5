// `weft bench comm`: collective bandwidth, as nccl-tests measures it.
//
// size S is the operation's size in bytes (the full output of all_gather, the
// full input of reduce_scatter, the tensor otherwise); time is the slowest
// rank's mean time per operation over back-to-back asynchronous calls, the
// fastest of --rounds rounds that alternate with the baseline;
// algbw = S / time; busbw = algbw x 2(n-1)/n for all_reduce, x (n-1)/n for
// all_gather, reduce_scatter and all_to_all, x 1 for broadcast. #wrong counts
// elements that differ from the exact result of known inputs (small integers,
// exact in f32 and bf16). The baseline is measured in the same run: on the
// local backend single-thread memcpy of S bytes (its copy rate), on the mpi
// backend the raw MPI collective (its busbw); the ratio columns divide busbw
// by it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "../cli.h"
#include "timing.h"
#include "weft/comm/local.h"
#include "weft/comm/mpi.h"
#include "weft/comm/world.h"
#include "weft/core/error.h"

namespace {

using weft::DType;
using weft::Tensor;
using weft::comm::OpKind;
using weft::comm::ProcessGroup;
using weft::comm::ReduceOp;
using weft::comm::Work;
namespace bench = weft::bench;

struct Config {
  OpKind op = OpKind::all_reduce;
  DType dtype = DType::f32;
  ReduceOp reduce = ReduceOp::sum;
  int root = 0;
  int64_t min_bytes = 0, max_bytes = 0;
  int64_t factor = 2;
  int iters = 0, warmup = 0, rounds = 3;
  bool json = false;
  bool check = true;
};

struct Row {
  int64_t bytes = 0, count = 0;
  double oop_s = 0, ip_s = 0, base = 0;  // base: bytes/s (memcpy) or raw busbw
  int64_t wrong_oop = 0, wrong_ip = 0;
  int iters = 0;  // timed calls per round
};

bool reduces(OpKind op) { return op == OpKind::all_reduce || op == OpKind::reduce_scatter; }

double bus_factor(OpKind op, int n) {
  switch (op) {
    case OpKind::all_reduce: return 2.0 * (n - 1) / n;
    case OpKind::broadcast: return 1.0;
    default: return static_cast<double>(n - 1) / n;
  }
}

// Small integers: sums over up to 32 ranks stay exact in bf16.
float value(int rank, int64_t i) { return static_cast<float>((rank * 7 + i) % 13 + 1); }

void fill(const Tensor& t, int rank, int64_t offset) {
  const int64_t n = t.numel();
  if (t.dtype() == DType::f32) {
    float* p = t.data<float>();
    for (int64_t i = 0; i < n; ++i) p[i] = value(rank, offset + i);
  } else {
    uint16_t* p = t.bf16_data();
    for (int64_t i = 0; i < n; ++i) p[i] = weft::f32_to_bf16(value(rank, offset + i));
  }
}

float expected_reduction(ReduceOp op, int n, int64_t i, DType dtype) {
  float acc = value(0, i);
  for (int p = 1; p < n; ++p)
    acc = op == ReduceOp::max ? std::max(acc, value(p, i)) : acc + value(p, i);
  if (op == ReduceOp::avg) acc /= static_cast<float>(n);
  return dtype == DType::bf16 ? weft::round_to_bf16(acc) : acc;
}

float element(const Tensor& t, int64_t i) {
  return t.dtype() == DType::f32 ? t.data<float>()[i] : weft::bf16_to_f32(t.bf16_data()[i]);
}

// The buffers of one rank for one size.
struct Buffers {
  Tensor in, out;  // out-of-place
  Tensor big;      // in-place: the full tensor (all_gather output, reduce_scatter input, ...)
};

Work issue(ProcessGroup& g, const Config& c, const Buffers& b, bool in_place) {
  const int n = g.size(), me = g.rank();
  switch (c.op) {
    case OpKind::all_gather:
      return in_place ? g.all_gather(b.big, b.big.chunk(n)[static_cast<size_t>(me)])
                      : g.all_gather(b.out, b.in);
    case OpKind::reduce_scatter:
      return in_place ? g.reduce_scatter(b.big.chunk(n)[static_cast<size_t>(me)], b.big, c.reduce)
                      : g.reduce_scatter(b.out, b.in, c.reduce);
    case OpKind::all_reduce:
      return in_place ? g.all_reduce(b.big, c.reduce) : g.all_reduce(b.out, b.in, c.reduce);
    case OpKind::broadcast:
      return in_place ? g.broadcast(b.big, c.root) : g.broadcast(b.out, b.in, c.root);
    case OpKind::all_to_all:
      return in_place ? g.all_to_all(b.big, b.big) : g.all_to_all(b.out, b.in);
    default: WEFT_FAIL("internal: not a benchmarked operation");
  }
}

// Fills the inputs, runs the operation once and counts wrong output elements.
int64_t check(ProcessGroup& g, const Config& c, const Buffers& b, bool in_place) {
  const int n = g.size(), me = g.rank();
  const int64_t total = (in_place ? b.big : (c.op == OpKind::all_gather ? b.out : b.in)).numel();
  const int64_t chunk = total / n;
  Tensor result;
  switch (c.op) {
    case OpKind::all_gather:
      fill(in_place ? b.big.chunk(n)[static_cast<size_t>(me)] : b.in, me, 0);
      result = in_place ? b.big : b.out;
      break;
    case OpKind::reduce_scatter:
      fill(in_place ? b.big : b.in, me, 0);
      result = in_place ? b.big.chunk(n)[static_cast<size_t>(me)] : b.out;
      break;
    default:
      fill(in_place ? b.big : b.in, me, 0);
      result = in_place ? b.big : b.out;
      break;
  }
  issue(g, c, b, in_place).wait();
  int64_t wrong = 0;
  const int64_t m = result.numel();
  for (int64_t i = 0; i < m; ++i) {
    float want = 0;
    switch (c.op) {
      case OpKind::all_gather: want = value(static_cast<int>(i / chunk), i % chunk); break;
      case OpKind::reduce_scatter:
        want = expected_reduction(c.reduce, n, me * chunk + i, c.dtype);
        break;
      case OpKind::all_reduce: want = expected_reduction(c.reduce, n, i, c.dtype); break;
      case OpKind::broadcast: want = value(c.root, i); break;
      default: want = value(static_cast<int>(i / chunk), me * chunk + i % chunk); break;
    }
    if (element(result, i) != want) ++wrong;
  }
  return wrong;
}

// Mean seconds per call on this rank, after warm-up.
template <typename Fn>
double time_calls(ProcessGroup& g, int warmup, int iters, Fn&& call) {
  for (int i = 0; i < warmup; ++i) call().wait();
  g.barrier().wait();
  std::vector<Work> works;
  works.reserve(static_cast<size_t>(iters));
  return bench::seconds([&] {
           for (int i = 0; i < iters; ++i) works.push_back(call());
           weft::comm::wait_all(works);
         }) /
         iters;
}

int iterations(const Config& c, int64_t bytes) {
  if (c.iters > 0) return c.iters;
  return static_cast<int>(
      std::clamp<int64_t>((int64_t{1} << 30) / std::max<int64_t>(bytes, 1), 10, 1000));
}

// The buffers of `count` elements (the operation's size) for op `c.op` on `n` ranks.
Buffers make_buffers(const Config& c, int64_t count, int n) {
  Buffers b;
  switch (c.op) {
    case OpKind::all_gather:
      b.in = Tensor::zeros({count / n}, c.dtype);
      b.out = Tensor::zeros({count}, c.dtype);
      break;
    case OpKind::reduce_scatter:
      b.in = Tensor::zeros({count}, c.dtype);
      b.out = Tensor::zeros({count / n}, c.dtype);
      break;
    default:
      b.in = Tensor::zeros({count}, c.dtype);
      b.out = Tensor::zeros({count}, c.dtype);
      break;
  }
  b.big = Tensor::zeros({count}, c.dtype);
  return b;
}

// Times out of place, in place and the baseline (seconds per call, the
// slowest rank's, the fastest round of each) into `row`.
void time_row(ProcessGroup& g, const Config& c, const Buffers& b, Row& row) {
  const int iters = iterations(c, row.bytes);
  row.iters = iters;
  const int warmup = c.warmup > 0 ? c.warmup : std::max(2, iters / 10);
  const bool local = g.backend() == "local";
  const bool raw_mpi = !local && (!reduces(c.op) || c.dtype == DType::f32);
  // Local baseline: single-thread memcpy of the same bytes, on rank 0 while
  // the others wait.
  std::vector<char> src, dst;
  if (local && g.rank() == 0) {
    src.assign(static_cast<size_t>(row.bytes), 1);
    dst.assign(static_cast<size_t>(row.bytes), 0);
  }
  const auto baseline = [&](int calls) {
    g.barrier().wait();
    if (local) {
      if (g.rank() != 0) return 0.0;
      return bench::seconds_per_call([&] { std::memcpy(dst.data(), src.data(), src.size()); },
                                     calls);
    }
    const ReduceOp op = c.reduce == ReduceOp::avg ? ReduceOp::sum : c.reduce;
    return bench::seconds_per_call(
        [&] { weft::comm::mpi_raw_collective(g, c.op, b.out, b.in, false, op, c.root); }, calls);
  };
  // Rounds alternate the three measurements, each round starting with a
  // different one, so that a slow spell of a shared machine or the order
  // itself favours none of them; each keeps its fastest round. The first
  // round warms each up.
  const bool has_baseline = local || raw_mpi;
  int warm[3] = {warmup, warmup, warmup};
  auto collective = [&](bool in_place, int& w) {
    const double s =
        time_calls(g, std::exchange(w, 0), iters, [&] { return issue(g, c, b, in_place); });
    return bench::across_ranks(g, s, ReduceOp::max);
  };
  const auto samples = bench::alternate(
      c.rounds,
      {[&] { return collective(false, warm[0]); }, [&] { return collective(true, warm[1]); },
       [&] {
         if (!has_baseline) return std::numeric_limits<double>::infinity();
         if (const int w = std::exchange(warm[2], 0); w > 0) baseline(w);
         return bench::across_ranks(g, baseline(iters), ReduceOp::max);
       }},
      bench::Order::rotating);
  row.oop_s = bench::best(samples[0]);
  row.ip_s = bench::best(samples[1]);
  const double base = bench::best(samples[2]);
  if (local) row.base = static_cast<double>(row.bytes) / base;
  if (raw_mpi) row.base = static_cast<double>(row.bytes) / base * bus_factor(c.op, g.size());
}

Row measure(ProcessGroup& g, const Config& c, int64_t bytes_wanted) {
  const int n = g.size();
  const int64_t elem = c.dtype == DType::f32 ? 4 : 2;
  const bool chunked = c.op != OpKind::all_reduce && c.op != OpKind::broadcast;
  int64_t count = bytes_wanted / elem;
  if (chunked) count = count / n * n;
  count = std::max<int64_t>(count, chunked ? n : 1);
  Row row{.bytes = count * elem, .count = count};
  const Buffers b = make_buffers(c, count, n);
  if (c.check) {
    row.wrong_oop = static_cast<int64_t>(
        bench::across_ranks(g, static_cast<double>(check(g, c, b, false)), ReduceOp::sum));
    row.wrong_ip = static_cast<int64_t>(
        bench::across_ranks(g, static_cast<double>(check(g, c, b, true)), ReduceOp::sum));
  }
  time_row(g, c, b, row);
  return row;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

void print_header(const Config& c, ProcessGroup& g, int64_t sizes) {
  const bool local = g.backend() == "local";
  std::printf(
      "# weft bench comm: %s, %s backend, %d ranks, %s%s, %lld size%s from %lld to %lld bytes\n",
      std::string(weft::comm::op_kind_name(c.op)).c_str(), local ? "local" : "mpi", g.size(),
      std::string(weft::dtype_name(c.dtype)).c_str(),
      reduces(c.op) ? (", " + std::string(weft::comm::reduce_op_name(c.reduce))).c_str() : "",
      static_cast<long long>(sizes), sizes == 1 ? "" : "s", static_cast<long long>(c.min_bytes),
      static_cast<long long>(c.max_bytes));
  std::printf(
      "# baseline: %s\n",
      local ? "single-thread memcpy of the same bytes (GB/s copied); ratio = busbw / memcpy"
            : "the raw MPI collective called directly (its busbw); ratio = busbw / raw busbw");
  std::printf("# timing: the slowest rank's mean per call over %s, the fastest of %d rounds\n",
              c.iters > 0 ? (std::to_string(c.iters) + " back-to-back calls").c_str()
                          : "back-to-back calls that move about 1 GiB (10 to 1000 calls)",
              c.rounds);
  std::printf("#\n");
  std::printf("# %10s %12s %6s %6s %5s   %9s %7s %7s %6s   %9s %7s %7s %6s   %8s %6s %6s\n", "", "",
              "", "", "", "", "out-of", "-place", "", "", "in-p", "lace", "", "baseline", "ratio",
              "");
  std::printf("# %10s %12s %6s %6s %5s   %9s %7s %7s %6s   %9s %7s %7s %6s   %8s %6s %6s\n", "size",
              "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
              "busbw", "#wrong", local ? "memcpy" : "raw MPI", "oop", "ip");
  std::printf("# %10s %12s %6s %6s %5s   %9s %7s %7s %6s   %9s %7s %7s %6s   %8s %6s %6s\n", "(B)",
              "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
              "", "(GB/s)", "", "");
}

weft::cli::Options bench_comm_options() {
  weft::cli::Options opts(
      "weft bench comm [options]",
      "Measures one collective over a range of sizes and prints the nccl-tests table:\n"
      "time, algbw = size / time and busbw = algbw x 2(n-1)/n (all_reduce), (n-1)/n\n"
      "(all_gather, reduce_scatter, all_to_all) or 1 (broadcast), out of place and in\n"
      "place, with #wrong counted against inputs whose result is known exactly, and a\n"
      "baseline measured in the same run (local: single-thread memcpy; mpi: the raw MPI\n"
      "collective). Under mpirun the mpi backend is used: mpirun -np 2 weft bench comm ...");
  opts.option("op", "OP", "all_reduce",
              "all_gather, reduce_scatter, all_reduce, broadcast or all_to_all")
      .option("ranks", "N", "2", "ranks (threads) of the local backend")
      .option("backend", "NAME", "", "local or mpi (default: mpi under mpirun, else local)")
      .option("min", "BYTES", "1K", "smallest size")
      .option("max", "BYTES", "64M", "largest size")
      .option("factor", "F", "2", "size multiplier between rows")
      .option("dtype", "TYPE", "f32", "f32 or bf16")
      .option("redop", "OP", "sum", "sum, avg or max (all_reduce, reduce_scatter)")
      .option("root", "R", "0", "broadcast root")
      .option("iters", "N", "0", "timed calls per size (0: about 1 GiB moved, 10..1000)")
      .option("warmup", "N", "0", "untimed calls per size (0: a tenth of iters, at least 2)")
      .option("rounds", "R", "3",
              "rounds per size, alternating out-of-place, in-place and baseline; each "
              "reports its fastest round")
      .flag("no-check", "skip the correctness check (#wrong shows -1)")
      .flag("json", "print one JSON object per size instead of the table");
  return opts;
}

Config parse_config(const weft::cli::Options& opts) {
  Config c;
  c.op = weft::comm::parse_op_kind(
      opts.choice("op", {"all_gather", "reduce_scatter", "all_reduce", "broadcast", "all_to_all"}));
  c.dtype = opts.choice("dtype", {"f32", "bf16"}) == "f32" ? DType::f32 : DType::bf16;
  c.reduce = weft::comm::parse_reduce_op(opts.choice("redop", {"sum", "avg", "max"}));
  c.root = static_cast<int>(opts.integer("root"));
  c.min_bytes = opts.bytes("min");
  c.max_bytes = opts.bytes("max");
  c.factor = opts.integer("factor");
  c.iters = static_cast<int>(opts.integer("iters"));
  c.warmup = static_cast<int>(opts.integer("warmup"));
  c.rounds = static_cast<int>(opts.integer("rounds"));
  c.json = opts.flag_set("json");
  c.check = !opts.flag_set("no-check");
  WEFT_CHECK(c.min_bytes >= 1 && c.min_bytes <= c.max_bytes,
             "--min ({}) must be at least 1 and at most --max ({})", c.min_bytes, c.max_bytes);
  WEFT_CHECK(c.factor >= 2, "--factor must be at least 2, got {}", c.factor);
  WEFT_CHECK(c.iters >= 0 && c.warmup >= 0, "--iters and --warmup must not be negative");
  WEFT_CHECK(c.rounds >= 1 && c.rounds <= 100, "--rounds must be in [1, 100], got {}", c.rounds);
  return c;
}

// What the rows add up to, for the footer.
struct Totals {
  double busbw_sum = 0, ratio_sum = 0;
  int64_t wrong = 0;
  int ratios = 0;
};

// The rates of one row, in GB/s.
struct Rates {
  double f = 0;  // bus factor
  double oop_alg = 0, ip_alg = 0, base = 0, oop_ratio = 0, ip_ratio = 0;
};

Rates rates(const Config& c, int n, const Row& r) {
  Rates x;
  x.f = bus_factor(c.op, n);
  x.oop_alg = static_cast<double>(r.bytes) / r.oop_s / 1e9;
  x.ip_alg = static_cast<double>(r.bytes) / r.ip_s / 1e9;
  x.base = r.base / 1e9;
  x.oop_ratio = x.base > 0 ? x.oop_alg * x.f / x.base : 0;
  x.ip_ratio = x.base > 0 ? x.ip_alg * x.f / x.base : 0;
  return x;
}

void print_json_row(ProcessGroup& world, const Config& c, const Row& r, const Rates& x,
                    const std::string& redop, int64_t wrong) {
  const double base = x.base;
  std::printf(
      "{\"op\":\"%s\",\"bytes\":%lld,\"count\":%lld,\"dtype\":\"%s\",\"redop\":\"%s\","
      "\"ranks\":%d,\"backend\":\"%s\",\"oop_us\":%.2f,\"oop_algbw\":%.3f,\"oop_busbw\":%.3f,"
      "\"ip_us\":%.2f,\"ip_algbw\":%.3f,\"ip_busbw\":%.3f,\"wrong\":%lld,\"baseline\":\"%s\","
      "\"baseline_gbps\":%s,\"oop_ratio\":%s,\"ip_ratio\":%s,\"iters\":%d,\"rounds\":%d}\n",
      std::string(weft::comm::op_kind_name(c.op)).c_str(), static_cast<long long>(r.bytes),
      static_cast<long long>(r.count), std::string(weft::dtype_name(c.dtype)).c_str(),
      redop.c_str(), world.size(), std::string(world.backend()).c_str(), r.oop_s * 1e6, x.oop_alg,
      x.oop_alg * x.f, r.ip_s * 1e6, x.ip_alg, x.ip_alg * x.f, static_cast<long long>(wrong),
      world.backend() == "local" ? "memcpy" : "raw_mpi",
      base > 0 ? fmt("%.3f", base).c_str() : "null",
      base > 0 ? fmt("%.3f", x.oop_ratio).c_str() : "null",
      base > 0 ? fmt("%.3f", x.ip_ratio).c_str() : "null", r.iters, c.rounds);
}

void print_table_row(const Config& c, const Row& r, const Rates& x, const std::string& redop) {
  const double base = x.base;
  const std::string root = c.op == OpKind::broadcast ? std::to_string(c.root) : "-1";
  const int64_t wrong_oop = c.check ? r.wrong_oop : -1, wrong_ip = c.check ? r.wrong_ip : -1;
  std::printf(
      "  %10lld %12lld %6s %6s %5s   %9.1f %7.2f %7.2f %6lld   %9.1f %7.2f %7.2f %6lld   "
      "%8s %6s %6s\n",
      static_cast<long long>(r.bytes), static_cast<long long>(r.count),
      std::string(weft::dtype_name(c.dtype)).c_str(), redop.c_str(), root.c_str(), r.oop_s * 1e6,
      x.oop_alg, x.oop_alg * x.f, static_cast<long long>(wrong_oop), r.ip_s * 1e6, x.ip_alg,
      x.ip_alg * x.f, static_cast<long long>(wrong_ip), base > 0 ? fmt("%.2f", base).c_str() : "-",
      base > 0 ? fmt("%.0f%%", 100 * x.oop_ratio).c_str() : "-",
      base > 0 ? fmt("%.0f%%", 100 * x.ip_ratio).c_str() : "-");
}

// Adds one size's row to the totals (every rank) and prints it (`printer`).
void add_row(ProcessGroup& world, const Config& c, const Row& r, bool printer, Totals& t) {
  const Rates x = rates(c, world.size(), r);
  t.busbw_sum += x.oop_alg * x.f;
  if (x.base > 0) {
    t.ratio_sum += x.oop_ratio;
    ++t.ratios;
  }
  if (!printer) return;
  const int64_t wrong = c.check ? r.wrong_oop + r.wrong_ip : -1;
  t.wrong += std::max<int64_t>(wrong, 0);
  const std::string redop =
      reduces(c.op) ? std::string(weft::comm::reduce_op_name(c.reduce)) : "none";
  if (c.json) {
    print_json_row(world, c, r, x, redop, wrong);
  } else {
    print_table_row(c, r, x, redop);
  }
  std::fflush(stdout);
}

void print_footer(const Config& c, const Totals& t, int64_t sizes) {
  std::printf("# Wrong values         : %lld %s\n", static_cast<long long>(t.wrong),
              !c.check  ? "(not checked)"
              : t.wrong ? "FAILED"
                        : "OK");
  std::printf("# Avg bus bandwidth    : %.3f GB/s\n", t.busbw_sum / static_cast<double>(sizes));
  if (t.ratios > 0)
    std::printf("# Avg ratio to baseline: %.0f%% (out of place)\n", 100 * t.ratio_sum / t.ratios);
  std::printf("#\n");
}

int bench_comm(const std::vector<std::string>& args) {
  weft::cli::Options opts = bench_comm_options();
  opts.parse(args);

  const Config c = parse_config(opts);
  const bool under_mpi = weft::comm::launched_by_mpi();
  std::string backend = opts.given("backend") ? opts.choice("backend", {"local", "mpi"})
                                              : (under_mpi ? "mpi" : "local");
  WEFT_CHECK(backend == "local" || under_mpi,
             "--backend mpi needs the processes to be started by mpirun, e.g. `mpirun -np 2 weft "
             "bench comm --op {}`",
             weft::comm::op_kind_name(c.op));
  WEFT_CHECK(backend == "mpi" || !under_mpi,
             "under mpirun weft bench comm uses the mpi backend; run without mpirun for --backend "
             "local");
  const int ranks = static_cast<int>(opts.integer("ranks"));
  WEFT_CHECK(ranks >= 1 && ranks <= 256, "--ranks must be in [1, 256], got {}", ranks);
  WEFT_CHECK(backend == "local" || !opts.given("ranks"),
             "--ranks sets the local backend's threads; under mpirun the ranks are mpirun's -np");

  std::vector<int64_t> sizes;
  for (int64_t s = c.min_bytes; s <= c.max_bytes; s *= c.factor) sizes.push_back(s);

  bool any_wrong = false;
  auto body = [&](ProcessGroup& world) {
    WEFT_CHECK(c.root >= 0 && c.root < world.size(), "--root {} is not a rank of the {} ranks",
               c.root, world.size());
    const bool printer = world.rank() == 0;
    if (printer && !c.json) print_header(c, world, static_cast<int64_t>(sizes.size()));
    Totals totals;
    for (int64_t s : sizes) add_row(world, c, measure(world, c, s), printer, totals);
    if (printer) any_wrong = totals.wrong > 0;
    if (printer && !c.json) print_footer(c, totals, static_cast<int64_t>(sizes.size()));
  };
  if (backend == "local") {
    weft::comm::run_local(ranks, body);
  } else {
    weft::comm::run_world(1, body);
  }
  return any_wrong ? 1 : 0;
}

const weft::cli::Register reg("bench comm", "collective bandwidth, nccl-tests style",
                              bench_comm_options, bench_comm);

}  // namespace
