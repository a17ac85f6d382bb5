// weft bench gemm: the GEMMs of one GPT-2-small layer through weft's gemm(),
// against the same oneDNN matmul called directly in the same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli.h"
#include "direct_gemm.h"
#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"
#include "weft/core/threads.h"
#include "weft/kernels/cpu_support.h"
#include "weft/kernels/gemm.h"

namespace weft {
namespace {

using Row = GemmShape;

// Seconds per call: the best of `rounds` timings of `iters` calls each.
template <typename Fn>
double time_call(Fn&& fn, int iters, int rounds) {
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) fn();
    std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    best = std::min(best, dt.count() / iters);
  }
  return best;
}

cli::Options run_options() {
  cli::Options opts("weft bench gemm [options]",
                    "Times the GEMMs of one GPT-2-small transformer layer (QKV, attention\n"
                    "projection, fc1, fc2; forward, dgrad and wgrad) through weft's gemm() and\n"
                    "through the same oneDNN matmul called directly in the same run, and\n"
                    "reports the ratio. wgrad rows accumulate into an f32 gradient, as in\n"
                    "training; bf16 forward/dgrad rows write bf16. Rounds alternate between\n"
                    "the two and the fastest round of each is compared, which keeps the\n"
                    "ratio meaningful on a machine shared with other work. Where oneDNN has no\n"
                    "bf16 matmul (CPUs without AVX-512), bf16 rows are emulated (bf16 values,\n"
                    "f32 kernels; marked `emulated`) and compared against the direct f32 matmul\n"
                    "of the same shape, the kernel they run on.");
  opts.option("dtype", "f32|bf16|both", "both", "input type")
      .option("tokens", "N", "2048", "tokens (batch x sequence) per GEMM")
      .option("width", "C", "768", "model width")
      .option("threads", "N", "0", "threads per call (0: all cores, or WEFT_NUM_THREADS)")
      .option("rounds", "N", "30",
              "timing rounds per row, weft and direct alternating (the best of each is reported)")
      .option("min-time", "SEC", "0", "minimum time of one round (0: one call per round)")
      .flag("json", "print one JSON object per row instead of the table");
  return opts;
}

int run(const std::vector<std::string>& args) {
  cli::Options opts = run_options();
  opts.parse(args);
  const std::string dtypes = opts.choice("dtype", {"f32", "bf16", "both"});
  const int64_t tokens = opts.integer("tokens"), width = opts.integer("width");
  WEFT_CHECK(tokens >= 1 && width >= 1, "--tokens and --width must be positive");
  const int threads = static_cast<int>(opts.integer("threads"));
  WEFT_CHECK(threads >= 0, "--threads must be >= 0");
  set_num_threads(threads);
  const int rounds = static_cast<int>(std::max<int64_t>(1, opts.integer("rounds")));
  const double min_time = opts.number("min-time");
  const bool json = opts.flag_set("json");

  (json ? std::cerr : std::cout) << "cpu: " << kernels::describe_cpu_support()
                                 << "; threads per call: " << num_threads() << "\n";
  if (!json) {
    std::printf("%-5s %-6s %6s %6s %6s %-5s %-8s %10s %10s %10s %7s\n", "layer", "op", "m", "n",
                "k", "dtype", "path", "ms", "GFLOP/s", "direct", "ratio");
  }
  const ExecContext& ec = ExecContext::host();
  std::vector<DType> types;
  if (dtypes != "bf16") types.push_back(DType::f32);
  if (dtypes != "f32") types.push_back(DType::bf16);
  for (DType dt : types) {
    for (const Row& r : layer_gemms(tokens, width)) {
      const bool wgrad = std::string(r.op) == "wgrad";
      const DType out = wgrad ? DType::f32 : dt;
      Tensor a = r.trans_a ? ec.empty({r.k, r.m}, dt) : ec.empty({r.m, r.k}, dt);
      Tensor b = r.trans_b ? ec.empty({r.n, r.k}, dt) : ec.empty({r.k, r.n}, dt);
      Tensor c = ec.zeros({r.m, r.n}, out);
      a.fill(0.01f);
      b.fill(0.02f);
      kernels::GemmOptions go{.trans_a = r.trans_a, .trans_b = r.trans_b, .accumulate = wgrad};
      auto weft_call = [&] { kernels::gemm(ec, a, b, c, go); };
      // An emulated row's baseline is the direct f32 matmul it runs on.
      const bool emulated = dt == DType::bf16 && !kernels::cpu_support().native_bf16;
      const DType base_in = emulated ? DType::f32 : dt, base_out = emulated ? DType::f32 : out;
      Tensor ba = emulated ? a.to(DType::f32) : a, bb = emulated ? b.to(DType::f32) : b,
             bc = emulated ? c.to(DType::f32) : c;
      DirectGemm direct(r, base_in, base_out, ba.raw(), bb.raw(), bc.raw(), wgrad);
      auto direct_call = [&] { direct.run(); };
      // Calibrate the iteration count on weft's call, then time both with the
      // same count, weft and direct alternating round by round.
      weft_call();
      direct_call();
      double once = time_call(weft_call, 1, 1);
      int iters = std::max(1, static_cast<int>(min_time / std::max(once, 1e-9)));
      double t_weft = 1e30, t_direct = 1e30;
      for (int round = 0; round < rounds; ++round) {
        t_weft = std::min(t_weft, time_call(weft_call, iters, 1));
        t_direct = std::min(t_direct, time_call(direct_call, iters, 1));
      }
      const double flops =
          2.0 * static_cast<double>(r.m) * static_cast<double>(r.n) * static_cast<double>(r.k);
      const double g_weft = flops / t_weft / 1e9, g_direct = flops / t_direct / 1e9;
      if (json) {
        std::printf(
            "{\"layer\":\"%s\",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"dtype\":\"%s\",\"op\":\"%s\","
            "\"emulated\":%s,\"direct_dtype\":\"%s\",\"ms\":%.4f,\"gflops\":%.1f,"
            "\"direct_gflops\":%.1f,\"ratio\":%.3f}\n",
            r.layer, static_cast<long long>(r.m), static_cast<long long>(r.n),
            static_cast<long long>(r.k), std::string(dtype_name(dt)).c_str(), r.op,
            emulated ? "true" : "false", std::string(dtype_name(base_in)).c_str(), t_weft * 1e3,
            g_weft, g_direct, g_weft / g_direct);
      } else {
        std::printf("%-5s %-6s %6lld %6lld %6lld %-5s %-8s %10.3f %10.1f %10.1f %7.3f\n", r.layer,
                    r.op, static_cast<long long>(r.m), static_cast<long long>(r.n),
                    static_cast<long long>(r.k), std::string(dtype_name(dt)).c_str(),
                    emulated ? "emulated" : "native", t_weft * 1e3, g_weft, g_direct,
                    g_weft / g_direct);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

cli::Register reg("bench gemm", "time the GEMMs of a GPT-2-small layer against direct oneDNN",
                  run_options, run);

}  // namespace
}  // namespace weft
