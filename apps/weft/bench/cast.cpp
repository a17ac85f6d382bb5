// weft bench cast: the quantize / dequantize kernels of the low-precision
// recipes against memcpy of the same input, timed in the same run.
#include "weft/kernels/cast.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "../cli.h"
#include "timing.h"
#include "weft/core/exec_context.h"
#include "weft/core/threads.h"
#include "weft/kernels/cpu_support.h"

namespace weft {
namespace {

cli::Options run_options() {
  cli::Options opts("weft bench cast [options]",
                    "Times the cast kernels of the FP8 (per-tensor and fp8-block) / MXFP8 / NVFP4\n"
                    "recipes on one thread: "
                    "quantizing an f32 (tokens, width) activation row-wise, row- and\n"
                    "column-wise, with stochastic rounding, and dequantizing it back, against\n"
                    "memcpy of the f32 input on the same thread. Rounds alternate cast and\n"
                    "memcpy; the medians are compared. Bandwidth counts the bytes a kernel must\n"
                    "move: the f32 input read plus the data and scales written (memcpy: read\n"
                    "plus write); `ratio` is the cast's bandwidth over memcpy's; `B/elem` the\n"
                    "quantized form's bytes per element, data and scales (f32: 4). The first line\n"
                    "names the instruction set the casts run on (\"weft's vector kernels\"):\n"
                    "the widest this processor has, or WEFT_MAX_CPU_ISA=avx512|avx2|baseline\n"
                    "(baseline: the compiler-vectorized code the vector kernels replace).");
  opts.option("tokens", "N", "8192", "rows of the tensor")
      .option("width", "C", "1024", "columns of the tensor")
      .option("rounds", "N", "7", "timing rounds per row (the median is reported)")
      .option("only", "TEXT", "", "run only the rows whose name contains TEXT")
      .flag("json", "print one JSON object per row instead of the table");
  return opts;
}

struct Case {
  const char* name;
  kernels::QuantizeConfig cfg;
  bool dequantize = false;
};

const Case kCases[] = {
    {"fp8 tensor e4m3 row", {.mode = ScalingMode::tensor, .dtype = DType::e4m3, .scale = 300}},
    {"fp8 tensor e4m3 row+col",
     {.mode = ScalingMode::tensor, .dtype = DType::e4m3, .columnwise = true, .scale = 300}},
    {"mxfp8 1x32 e4m3 row", {.mode = ScalingMode::block_1x32, .dtype = DType::e4m3}},
    {"mxfp8 1x32 e4m3 row+col",
     {.mode = ScalingMode::block_1x32, .dtype = DType::e4m3, .columnwise = true}},
    {"fp8-block 1x128 e4m3 row", {.mode = ScalingMode::block_1x128, .dtype = DType::e4m3}},
    {"fp8-block 1x128 e4m3 row+col",
     {.mode = ScalingMode::block_1x128, .dtype = DType::e4m3, .columnwise = true}},
    {"fp8-block 128x128 e4m3 row", {.mode = ScalingMode::block_128x128, .dtype = DType::e4m3}},
    {"nvfp4 1x16 row", {.mode = ScalingMode::block_1x16, .dtype = DType::e2m1}},
    {"nvfp4 16x16 row", {.mode = ScalingMode::block_16x16, .dtype = DType::e2m1}},
    {"nvfp4 1x16 row stochastic",
     {.mode = ScalingMode::block_1x16, .dtype = DType::e2m1, .stochastic = true, .seed = 1}},
    {"dequantize fp8 tensor",
     {.mode = ScalingMode::tensor, .dtype = DType::e4m3, .scale = 300},
     true},
    {"dequantize mxfp8", {.mode = ScalingMode::block_1x32, .dtype = DType::e4m3}, true},
    {"dequantize fp8-block", {.mode = ScalingMode::block_1x128, .dtype = DType::e4m3}, true},
    {"dequantize nvfp4", {.mode = ScalingMode::block_1x16, .dtype = DType::e2m1}, true},
};

// One row: the case's kernel and memcpy of the same input alternating round
// by round, the median of each.
void time_case(const ExecContext& ec, const Case& c, const Tensor& x, const Tensor& copy,
               int rounds, bool json) {
  const int64_t rows = x.shape()[0], cols = x.shape()[1];
  const double in_bytes = static_cast<double>(x.nbytes());
  QuantizedTensor q;
  kernels::quantize(ec, x, c.cfg, q);
  Tensor back = ec.empty({rows, cols});
  auto cast = [&] {
    if (c.dequantize) {
      kernels::dequantize(ec, q, false, back);
    } else {
      kernels::quantize(ec, x, c.cfg, q);
    }
  };
  auto mem = [&] { std::memcpy(copy.raw(), x.raw(), static_cast<size_t>(x.nbytes())); };
  cast();
  mem();
  const auto samples = bench::alternate(
      rounds, {[&] { return bench::seconds(cast); }, [&] { return bench::seconds(mem); }});
  const double t_cast = bench::upper_median(samples[0]), t_mem = bench::upper_median(samples[1]);
  const double q_bytes = static_cast<double>(q.storage_bytes());
  // Quantize reads f32 and writes q; dequantize reads q and writes f32.
  const double bytes = in_bytes + q_bytes;
  const double bw = bytes / t_cast / 1e9, bw_mem = 2 * in_bytes / t_mem / 1e9;
  // The quantized form's bytes per element: data and scales (and the
  // column-wise copy's, where made), against f32's 4.
  const double per_element = q_bytes / static_cast<double>(rows * cols);
  if (json) {
    std::printf(
        "{\"kernel\":\"%s\",\"ms\":%.4f,\"gbps\":%.2f,\"memcpy_ms\":%.4f,\"memcpy_gbps\":%.2f,"
        "\"ratio\":%.3f,\"bytes_per_element\":%.4f}\n",
        c.name, t_cast * 1e3, bw, t_mem * 1e3, bw_mem, bw / bw_mem, per_element);
  } else {
    std::printf("%-27s %9.3f %9.2f %9.3f %11.2f %7.3f %7.4f\n", c.name, t_cast * 1e3, bw,
                t_mem * 1e3, bw_mem, bw / bw_mem, per_element);
  }
  std::fflush(stdout);
}

int run(const std::vector<std::string>& args) {
  cli::Options opts = run_options();
  opts.parse(args);
  const int64_t rows = opts.integer("tokens"), cols = opts.integer("width");
  WEFT_CHECK(rows >= 16 && cols >= 16 && rows % 16 == 0 && cols % 16 == 0,
             "--tokens and --width must be positive multiples of 16, got {} and {}", rows, cols);
  const int rounds = static_cast<int>(std::max<int64_t>(1, opts.integer("rounds")));
  const bool json = opts.flag_set("json");
  set_num_threads(1);
  const ExecContext& ec = ExecContext::host();
  bench::info_stream(json) << "cpu: " << kernels::describe_cpu_support() << "; one thread; tensor ("
                           << rows << ", " << cols << ") f32\n";
  Tensor x = ec.empty({rows, cols});
  {
    float* p = x.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i)
      p[i] = static_cast<float>((i * 7919) % 2001 - 1000) * 1e-3f;
  }
  Tensor copy = ec.empty({rows, cols});
  if (!json) {
    std::printf("%-27s %9s %9s %9s %9s %7s %7s\n", "kernel", "ms", "GB/s", "memcpy ms",
                "memcpy GB/s", "ratio", "B/elem");
  }
  const std::string only = opts.str("only");
  for (const Case& c : kCases) {
    if (std::string(c.name).find(only) != std::string::npos)
      time_case(ec, c, x, copy, rounds, json);
  }
  return 0;
}

cli::Register reg("bench cast", "time the FP8/MXFP8/NVFP4 cast kernels against memcpy", run_options,
                  run);

}  // namespace
}  // namespace weft
