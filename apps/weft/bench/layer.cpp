// weft bench layer: forward + backward of one TransformerLayer at GPT-2-small
// width (GPT-2's block or Llama's), where the time goes (GEMMs, other kernels, communication), and
// the ratio to TP=1 on the same threads per rank, measured in the same run.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "../cli.h"
#include "timing.h"
#include "weft/comm/grid.h"
#include "weft/comm/local.h"
#include "weft/comm/world.h"
#include "weft/core/profile.h"
#include "weft/core/threads.h"
#include "weft/nn/transformer_layer.h"
#include "weft/parallel/mappings.h"

namespace weft {
namespace {

struct LayerRun {
  int tp = 1;
  nn::SequenceParallel sp = nn::SequenceParallel::off;
};

struct Timing {
  double seconds = 0;  // per iteration, slowest rank
  double gemm = 0;     // per iteration, on that rank
  double comm = 0;
};

struct Setup {
  int64_t batch, seq, width, heads;
  DType dtype;
  int threads, warmup, iters;
  bool llama = false;    // RMSNorm, SwiGLU, rotary positions, no biases
  int64_t kv_heads = 0;  // 0: heads
  int64_t hidden = 0;    // MLP hidden size; 0: 4·C (GELU) or 8/3·C rounded to 64 (SwiGLU)
};

// The layer's configuration for `s`.
nn::TransformerLayerConfig layer_config(const Setup& s) {
  nn::TransformerLayerConfig c{.name = "h.0",
                               .width = s.width,
                               .heads = s.heads,
                               .kv_heads = s.kv_heads,
                               .hidden = s.hidden,
                               .layers = 12};
  if (s.llama) {
    c.norm = nn::NormKind::rms;
    c.mlp = nn::MlpKind::swiglu;
    c.bias = false;
    c.rotary = true;
    c.max_positions = s.seq;
  }
  return c;
}

// Runs on every rank of `world`, which holds exactly one TP group.
Timing run_layer(comm::ProcessGroup& world, const Setup& s, LayerRun r) {
  set_num_threads(s.threads);
  comm::Grid grid(world, "tp", {{"tp", r.tp}});
  auto tp = grid.group_ptr("tp");
  nn::TransformerLayer layer(parallel::make_context(tp, r.sp, parallel::Precision::of(s.dtype), 1),
                             layer_config(s));
  // The residual stream's layout: sequence-major under seq SP, this rank's rows under SP.
  Tensor x = r.sp == nn::SequenceParallel::seq
                 ? Tensor::full({s.seq, s.batch, s.width}, 0.5f, s.dtype)
                 : Tensor::full({s.batch, s.seq, s.width}, 0.5f, s.dtype);
  if (r.sp != nn::SequenceParallel::off)
    x = parallel::slice_along(ExecContext::host(), x, 0, r.tp, tp->rank());
  Tensor dy = Tensor::full(x.shape(), 0.01f, s.dtype);
  auto step = [&] {
    nn::Ctx ctx;
    Tensor y = layer.forward(ctx, x);
    layer.backward(ctx, dy);
  };
  for (int i = 0; i < s.warmup; ++i) step();
  world.barrier().wait();
  profile::reset();
  const double elapsed = bench::seconds([&] {
    for (int i = 0; i < s.iters; ++i) step();
  });
  profile::Totals tot = profile::totals();
  // The slowest rank sets the time; report its breakdown.
  const double slowest = bench::across_ranks(world, elapsed, comm::ReduceOp::max);
  return {slowest / s.iters, tot.gemm / s.iters, tot.comm / s.iters};
}

// fwd + bwd FLOPs of one layer over the whole batch: per token forward, the
// qkv GEMM 2·C·(C + 2·Hkv·D), proj 2·C², the MLP 4·C·F (GELU) or 6·C·F
// (SwiGLU), and 2·T·C for QKᵀ and P·V (causal: half of 4·T·C); backward twice
// the forward. GPT-2's block: 24·C² + 2·T·C.
double layer_flops(const Setup& s) {
  const double tokens = static_cast<double>(s.batch * s.seq), c = static_cast<double>(s.width);
  const double kv = static_cast<double>(s.kv_heads ? s.kv_heads : s.heads) *
                    static_cast<double>(s.width / s.heads);
  const double f = static_cast<double>(s.hidden);
  const double gemms = 2.0 * c * (c + 2.0 * kv) + 2.0 * c * c + (s.llama ? 6.0 : 4.0) * c * f;
  const double fwd = tokens * (gemms + 2.0 * static_cast<double>(s.seq) * c);
  return 3.0 * fwd;
}

cli::Options run_options() {
  cli::Options opts("weft bench layer [options]",
                    "Times forward + backward of one GPT-2-small TransformerLayer (C=768,\n"
                    "12 heads by default; --arch llama: Llama's block) at the given TP size and "
                    "sequence parallelism, and\n"
                    "the same layer at TP=1 on the same threads per rank, in the same run.\n"
                    "Reports time per iteration, GFLOP/s (the layer's total work over the\n"
                    "slowest rank's time) and the share of time in GEMMs, communication\n"
                    "waits and everything else. Ranks are threads (local backend) or, under\n"
                    "mpirun, processes.");
  opts.option("tp", "N", "1", "tensor-parallel size (ranks)")
      .option("sp", "off|seq|batch", "off", "sequence parallelism")
      .option("dtype", "f32|bf16", "f32", "compute dtype")
      .option("batch", "B", "8", "samples per iteration")
      .option("seq", "T", "256", "sequence length")
      .option("width", "C", "768", "model width")
      .option("heads", "H", "12", "attention heads")
      .option("arch", "gpt2|llama", "gpt2",
              "the block: GPT-2's (LayerNorm, GELU, learned positions, biases) or Llama's "
              "(RMSNorm, SwiGLU, rotary positions, no biases)")
      .option("kv-heads", "N", "heads", "key/value heads (grouped-query attention)")
      .option("hidden", "N", "auto",
              "MLP hidden size (auto: 4 x width for gpt2, 8/3 x width rounded to 64 for llama)")
      .option("threads", "N", "1", "threads per rank")
      .option("warmup", "N", "2", "untimed iterations")
      .option("iters", "N", "5", "timed iterations")
      .flag("json", "print one JSON object per row instead of the table");
  return opts;
}

// The layer and layout the options ask for, checked against each other.
Setup setup_of(const cli::Options& opts, int tp, nn::SequenceParallel sp) {
  Setup s{opts.integer("batch"),
          opts.integer("seq"),
          opts.integer("width"),
          opts.integer("heads"),
          parse_dtype(opts.choice("dtype", {"f32", "bf16"})),
          static_cast<int>(opts.integer("threads")),
          static_cast<int>(opts.integer("warmup")),
          static_cast<int>(opts.integer("iters"))};
  s.llama = opts.choice("arch", {"gpt2", "llama"}) == "llama";
  s.kv_heads = opts.given("kv-heads") ? opts.integer("kv-heads") : s.heads;
  s.hidden = opts.given("hidden") ? opts.integer("hidden")
             : s.llama            ? (8 * s.width / 3 + 63) / 64 * 64
                                  : 4 * s.width;
  WEFT_CHECK(tp >= 1, "--tp must be at least 1, got {}", tp);
  WEFT_CHECK(s.batch >= 1 && s.seq >= 1 && s.threads >= 1 && s.iters >= 1 && s.warmup >= 0,
             "--batch, --seq, --threads and --iters must be positive");
  WEFT_CHECK(s.heads % tp == 0, "--heads {} is not divisible by --tp {}", s.heads, tp);
  WEFT_CHECK(s.kv_heads >= 1 && s.heads % s.kv_heads == 0 &&
                 (s.kv_heads % tp == 0 || tp % s.kv_heads == 0),
             "--kv-heads {} must divide --heads {} and be a multiple of --tp {} or divide it "
             "(each key/value head replicated on tp/kv-heads ranks)",
             s.kv_heads, s.heads, tp);
  WEFT_CHECK(s.hidden >= 1 && s.hidden % tp == 0, "--hidden {} is not divisible by --tp {}",
             s.hidden, tp);
  if (sp != nn::SequenceParallel::off) {
    const int64_t split = sp == nn::SequenceParallel::seq ? s.seq : s.batch;
    WEFT_CHECK(split % tp == 0, "--sp {} splits {} {} over --tp {}: choose a multiple of {}",
               nn::sequence_parallel_name(sp),
               sp == nn::SequenceParallel::seq ? "--seq" : "--batch", split, tp, tp);
  }
  return s;
}

int run(const std::vector<std::string>& args) {
  cli::Options opts = run_options();
  opts.parse(args);
  const int tp = static_cast<int>(opts.integer("tp"));
  const nn::SequenceParallel sp =
      nn::parse_sequence_parallel(opts.choice("sp", {"off", "seq", "batch"}));
  const Setup s = setup_of(opts, tp, sp);
  const bool json = opts.flag_set("json");
  const bool mpi = comm::launched_by_mpi();

  Timing base, mine;
  int rank = 0;
  auto body = [&](comm::ProcessGroup& world) {
    rank = world.rank();
    WEFT_CHECK(world.size() == tp, "bench layer runs one TP group: start {} ranks (got {})", tp,
               world.size());
    // Baseline: TP=1 on rank 0 alone, then the requested layout on every rank.
    if (world.rank() == 0) {
      base = run_layer(*comm::local_world_of_one(), s, {1, nn::SequenceParallel::off});
    }
    world.barrier().wait();
    Timing t = run_layer(world, s, {tp, sp});
    if (world.rank() == 0) mine = t;
  };
  if (mpi) {
    comm::run_world(tp, body);
    if (rank != 0) return 0;
  } else {
    comm::run_local(tp, body);
  }
  const double flops = layer_flops(s);
  auto row = [&](const char* what, int t, nn::SequenceParallel p, const Timing& tm) {
    const double other = std::max(0.0, tm.seconds - tm.gemm - tm.comm);
    if (json) {
      std::printf(
          "{\"run\":\"%s\",\"tp\":%d,\"sp\":\"%s\",\"dtype\":\"%s\",\"batch\":%lld,\"seq\":%lld,"
          "\"ms\":%.3f,\"gflops\":%.1f,\"gemm_share\":%.3f,\"other_share\":%.3f,"
          "\"comm_share\":%.3f,\"ratio_to_tp1\":%.3f}\n",
          what, t, nn::sequence_parallel_name(p), std::string(dtype_name(s.dtype)).c_str(),
          static_cast<long long>(s.batch), static_cast<long long>(s.seq), tm.seconds * 1e3,
          flops / tm.seconds / 1e9, tm.gemm / tm.seconds, other / tm.seconds, tm.comm / tm.seconds,
          tm.seconds / base.seconds);
    } else {
      std::printf("%-8s %3d %-5s %-5s %10.2f %9.1f %7.1f%% %7.1f%% %7.1f%% %8.3f\n", what, t,
                  nn::sequence_parallel_name(p), std::string(dtype_name(s.dtype)).c_str(),
                  tm.seconds * 1e3, flops / tm.seconds / 1e9, 100 * tm.gemm / tm.seconds,
                  100 * other / tm.seconds, 100 * tm.comm / tm.seconds, tm.seconds / base.seconds);
    }
  };
  if (!json) {
    std::printf(
        "layer: %s C=%lld heads=%lld kv-heads=%lld hidden=%lld batch=%lld seq=%lld, %d thread(s) "
        "per rank, backend %s\n",
        s.llama ? "llama" : "gpt2", static_cast<long long>(s.width),
        static_cast<long long>(s.heads), static_cast<long long>(s.kv_heads),
        static_cast<long long>(s.hidden), static_cast<long long>(s.batch),
        static_cast<long long>(s.seq), s.threads, mpi ? "mpi" : "local");
    std::printf("%-8s %3s %-5s %-5s %10s %9s %8s %8s %8s %8s\n", "run", "tp", "sp", "dtype",
                "ms/iter", "GFLOP/s", "gemm", "other", "comm", "vs tp1");
  }
  row("baseline", 1, nn::SequenceParallel::off, base);
  row("weft", tp, sp, mine);
  return 0;
}

cli::Register reg("bench layer",
                  "time forward+backward of one TransformerLayer: GEMM, kernel and comm shares",
                  run_options, run);

}  // namespace
}  // namespace weft
