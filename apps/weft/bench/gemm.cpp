// weft bench gemm: the GEMMs of one GPT-2-small layer through weft's gemm(),
// against the same oneDNN matmul (--device cpu) or cuBLASLt matmul (--device
// cuda) called directly in the same run.
#include "weft/kernels/gemm.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "../cli.h"
#include "direct_cublaslt.h"
#include "direct_gemm.h"
#include "grouped_gemm.h"
#include "timing.h"
#include "weft/core/cuda.h"
#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"
#include "weft/core/threads.h"
#include "weft/kernels/activation.h"
#include "weft/kernels/cast.h"
#include "weft/kernels/cpu_support.h"
#include "weft/kernels/random.h"

namespace weft {
namespace {

using Row = GemmShape;

// One row's timings: seconds per call of weft's gemm() and of the direct call.
struct Timing {
  double weft = 0, direct = 0;
  const char* path = "native";  // what weft ran: native, emulated, cublaslt
  DType direct_dtype = DType::f32;
};

struct Settings {
  int rounds = 30;
  double min_time = 0;
  bool json = false;
  bool cuda = false;
};

void print_header(const Settings& st) {
  if (st.json) return;
  const char* rate = st.cuda ? "TFLOP/s" : "GFLOP/s";
  std::printf("%-5s %-6s %6s %6s %6s %-5s %-8s %10s %10s %10s %7s\n", "layer", "op", "m", "n", "k",
              "dtype", "path", "ms", rate, "direct", "ratio");
}

// A row's type: "fp8" for the FP8 rows (their operands are e4m3, or e5m2 and
// e4m3 for the gradient GEMMs), else the dtype's name.
std::string row_type(DType dt) { return dt == DType::e4m3 ? "fp8" : std::string(dtype_name(dt)); }

void print_row(const Settings& st, const Row& r, DType dt, const Timing& t) {
  const double flops =
      2.0 * static_cast<double>(r.m) * static_cast<double>(r.n) * static_cast<double>(r.k);
  const double g_weft = flops / t.weft / 1e9, g_direct = flops / t.direct / 1e9;
  if (st.json) {
    std::printf(
        "{\"layer\":\"%s\",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"dtype\":\"%s\",\"op\":\"%s\","
        "\"device\":\"%s\",\"emulated\":%s,\"direct_dtype\":\"%s\",\"ms\":%.4f,\"gflops\":%.1f,"
        "\"direct_gflops\":%.1f,\"ratio\":%.3f}\n",
        r.layer, static_cast<long long>(r.m), static_cast<long long>(r.n),
        static_cast<long long>(r.k), row_type(dt).c_str(), r.op, st.cuda ? "cuda" : "cpu",
        std::string(t.path) == "emulated" ? "true" : "false",
        std::string(dtype_name(t.direct_dtype)).c_str(), t.weft * 1e3, g_weft, g_direct,
        g_weft / g_direct);
  } else {
    const double unit = st.cuda ? 1e3 : 1.0;
    std::printf("%-5s %-6s %6lld %6lld %6lld %-5s %-8s %10.3f %10.1f %10.1f %7.3f\n", r.layer, r.op,
                static_cast<long long>(r.m), static_cast<long long>(r.n),
                static_cast<long long>(r.k), row_type(dt).c_str(), t.path, t.weft * 1e3,
                g_weft / unit, g_direct / unit, g_weft / g_direct);
  }
  std::fflush(stdout);
}

// A row's operands on `ec`: a and b random, c zero (f32 for wgrad, which
// accumulates into it, as training does).
struct Operands {
  Tensor a, b, c;
  kernels::GemmOptions go;
};

Operands operands(const ExecContext& ec, const Row& r, DType dt) {
  const bool wgrad = std::string(r.op) == "wgrad" || std::string(r.op) == "bgrad";
  Operands o{.a = r.trans_a ? ec.empty({r.k, r.m}, dt) : ec.empty({r.m, r.k}, dt),
             .b = r.trans_b ? ec.empty({r.n, r.k}, dt) : ec.empty({r.k, r.n}, dt),
             .c = ec.zeros({r.m, r.n}, wgrad ? DType::f32 : dt),
             .go = {.trans_a = r.trans_a, .trans_b = r.trans_b, .accumulate = wgrad}};
  // Random operands (uniform in [0, 1)): constants let a GPU run cooler and
  // faster than real data does.
  uint64_t seed = 11;
  for (Tensor* t : {&o.a, &o.b}) {
    Tensor u = ec.empty({t->numel()}, DType::f32);
    kernels::fill_uniform(ec, seed++, 0, u);
    t->copy_from(u.to(t->dtype()).reshape(t->shape()));
  }
  return o;
}

// The CPU row: weft and direct oneDNN alternating round by round, the best
// round of each.
Timing time_cpu_row(const Settings& st, const Row& r, DType dt) {
  const ExecContext& ec = ExecContext::host();
  Operands o = operands(ec, r, dt);
  const bool wgrad = o.go.accumulate;
  const DType out = o.c.dtype();
  Tensor &a = o.a, &b = o.b, &c = o.c;
  auto weft_call = [&] { kernels::gemm(ec, a, b, c, o.go); };
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
  double once = bench::seconds_per_call(weft_call, 1);
  int iters = std::max(1, static_cast<int>(st.min_time / std::max(once, 1e-9)));
  const auto samples =
      bench::alternate(st.rounds, {[&] { return bench::seconds_per_call(weft_call, iters); },
                                   [&] { return bench::seconds_per_call(direct_call, iters); }});
  return {.weft = bench::best(samples[0]),
          .direct = bench::best(samples[1]),
          .path = emulated ? "emulated" : "native",
          .direct_dtype = base_in};
}

#if WEFT_HAVE_CUDA
// weft's call and the direct cuBLASLt call on the same buffers, after a
// warm-up, each round a batch of calls between CUDA events, alternating; the
// median round of each.
Timing against_direct(const Settings& st, const ExecContext& ec,
                      const std::function<void()>& weft_call, DirectCublasLt& direct,
                      DType direct_dtype) {
  constexpr int kMinIters = 10, kWarmup = 3;
  auto direct_call = [&] { direct.run(); };
  for (int i = 0; i < kWarmup; ++i) {
    weft_call();
    direct_call();
  }
  const double once = cuda_seconds_per_call(ec.stream(), weft_call, 1);
  const int iters = std::max(kMinIters, static_cast<int>(st.min_time / std::max(once, 1e-9)));
  const auto samples = bench::alternate(
      st.rounds, {[&] { return cuda_seconds_per_call(ec.stream(), weft_call, iters); },
                  [&] { return cuda_seconds_per_call(ec.stream(), direct_call, iters); }});
  return {.weft = bench::median(samples[0]),
          .direct = bench::median(samples[1]),
          .path = "cublaslt",
          .direct_dtype = direct_dtype};
}

// The GPU row: weft's gemm() and the direct cuBLASLt matmul on the same
// buffers, each round a batch of calls between CUDA events, weft and direct
// alternating; the median round of each.
Timing time_cuda_row(const Settings& st, const ExecContext& ec, const Row& r, DType dt) {
  Operands o = operands(ec, r, dt);
  const bool wgrad = o.go.accumulate;
  const DType out = o.c.dtype();
  Tensor &a = o.a, &b = o.b, &c = o.c;
  auto weft_call = [&] { kernels::gemm(ec, a, b, c, o.go); };
  DirectCublasLt direct(r, dt, out, a.raw(), b.raw(), c.raw(), wgrad, ec.stream(),
                        ec.device().index);
  return against_direct(st, ec, weft_call, direct, dt);
}

// The epilogue rows (cuda): fc1's forward with GELU (GELU_AUX_BIAS: the
// pre-activation written beside), fc2's dgrad with the GELU gradient and
// fc1's bias gradient (DGELU_BGRAD), fc1's wgrad with its bias gradient
// (BGRADB).
struct EpilogueRow {
  Row row;
  kernels::GemmEpilogue kind;
};

std::vector<EpilogueRow> epilogue_rows(int64_t tokens, int64_t c) {
  using kernels::GemmEpilogue;
  return {{{"fc1", "gelu", tokens, 4 * c, c, false, true}, GemmEpilogue::gelu_aux},
          {{"fc2", "dgelu", tokens, 4 * c, c, false, false}, GemmEpilogue::dgelu_bgrad},
          {{"fc1", "bgrad", 4 * c, c, tokens, true, false}, GemmEpilogue::bgrad_a}};
}

// weft's gemm() with the epilogue (an f32 bias, rounded per call for a bf16
// output; the bias gradient added to an f32 vector) against the direct
// cuBLASLt matmul with the same epilogue (bias and bias gradient in the
// output's type, nothing added); false where weft does not fuse it (then
// nothing is timed).
bool time_cuda_epilogue_row(const Settings& st, const ExecContext& ec, const EpilogueRow& er,
                            DType dt, Timing& t) {
  using kernels::GemmEpilogue;
  const Row& r = er.row;
  Operands o = operands(ec, r, dt);
  const DType out = o.c.dtype();
  Tensor &a = o.a, &b = o.b, &c = o.c;
  const int64_t bias_n = er.kind == GemmEpilogue::bgrad_a ? r.m : r.n;
  Tensor bias = ec.empty({bias_n}, DType::f32);
  kernels::fill_uniform(ec, 31, 0, bias);
  Tensor bias_out = ec.empty({bias_n}, out);
  kernels::convert(ec, bias, bias_out);
  Tensor aux = ec.empty({r.m, r.n}, out);
  {
    Tensor u = ec.empty({aux.numel()}, DType::f32);
    kernels::fill_uniform(ec, 32, 0, u);
    Tensor v = aux.reshape({aux.numel()});
    kernels::convert(ec, u, v);
  }
  Tensor grad = ec.zeros({bias_n}), grad_out = ec.empty({bias_n}, out);
  kernels::GemmOptions go = o.go;
  go.epilogue = er.kind;
  DirectEpilogue de{.kind = er.kind};
  if (er.kind == GemmEpilogue::gelu_aux) {
    go.bias = &bias;
    go.aux = &aux;
    de.bias = bias_out.raw();
    de.aux = aux.raw();
  } else {
    go.bias_grad = &grad;
    de.bias_grad = grad_out.raw();
    if (er.kind == GemmEpilogue::dgelu_bgrad) {
      go.aux = &aux;
      de.aux = aux.raw();
    }
  }
  if (!kernels::gemm_epilogue_fused(ec, a, b, c, go)) return false;
  auto weft_call = [&] { kernels::gemm(ec, a, b, c, go); };
  DirectCublasLt direct(r, dt, out, a.raw(), b.raw(), c.raw(), go.accumulate, ec.stream(),
                        ec.device().index, nullptr, &de);
  t = against_direct(st, ec, weft_call, direct, dt);
  t.path = "fused";
  return true;
}

void print_unfused_row(const Settings& st, const Row& r, DType dt) {
  if (st.json) {
    std::printf(
        "{\"layer\":\"%s\",\"op\":\"%s\",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"dtype\":\"%s\","
        "\"device\":\"cuda\",\"fused\":false}\n",
        r.layer, r.op, static_cast<long long>(r.m), static_cast<long long>(r.n),
        static_cast<long long>(r.k), std::string(dtype_name(dt)).c_str());
  } else {
    std::printf(
        "%-5s %-6s %6lld %6lld %6lld %-5s %-8s cuBLASLt takes no such epilogue here: "
        "weft runs it unfused; not timed\n",
        r.layer, r.op, static_cast<long long>(r.m), static_cast<long long>(r.n),
        static_cast<long long>(r.k), std::string(dtype_name(dt)).c_str(), "unfused");
  }
  std::fflush(stdout);
}

// The FP8 row: kernels::quantized_gemm against a direct cuBLASLt FP8 matmul
// with the same settings, on random operands quantized per tensor on the GPU.
// A (m, k) is x in forward (e4m3) and dy in dgrad and wgrad (e5m2); B (n, k)
// is e4m3 (the weight, or x for wgrad); the layout is TN, as Hopper's FP8 MMA
// needs (a Linear passes column-wise copies for dgrad and wgrad). Forward
// takes fast accumulation, as Transformer Engine does; wgrad accumulates into
// an f32 gradient; the others write bf16.
Timing time_cuda_fp8_row(const Settings& st, const ExecContext& ec, const Row& r) {
  const std::string op = r.op;
  const bool wgrad = op == "wgrad", forward = op == "fwd";
  auto quantized = [&](int64_t rows, int64_t cols, DType type, uint64_t seed) {
    Tensor x = ec.empty({rows, cols}, DType::f32);
    kernels::fill_uniform(ec, seed, 0, x);
    kernels::QuantizeConfig cfg;
    cfg.dtype = type;
    cfg.scale = type == DType::e4m3 ? 400.0f : 50000.0f;  // uniform [0, 1) into range
    QuantizedTensor q;
    kernels::quantize(ec, x, cfg, q);
    return q;
  };
  const DType a_type = forward ? DType::e4m3 : DType::e5m2;
  const QuantizedTensor qa = quantized(r.m, r.k, a_type, 21);
  const QuantizedTensor qb = quantized(r.n, r.k, DType::e4m3, 22);
  Tensor c = ec.zeros({r.m, r.n}, wgrad ? DType::f32 : DType::bf16);
  kernels::QuantizedGemmOptions opt;
  opt.accumulate = wgrad;
  opt.fast_accumulation = forward;
  auto weft_call = [&] { kernels::quantized_gemm(ec, {&qa, false}, {&qb, false}, c, opt); };
  Row tn = r;
  tn.trans_a = false;
  tn.trans_b = true;
  const DirectFp8 fp8{.a_type = a_type,
                      .b_type = DType::e4m3,
                      .a_scale_inv = qa.scale_inv.raw(),
                      .b_scale_inv = qb.scale_inv.raw(),
                      .fast_accumulation = forward};
  DirectCublasLt direct(tn, a_type, c.dtype(), qa.data.raw(), qb.data.raw(), c.raw(), wgrad,
                        ec.stream(), ec.device().index, &fp8);
  return against_direct(st, ec, weft_call, direct, DType::e4m3);
}
#endif

// The grouped row (CPU): a MoE fc1 of `experts` experts, forward + backward,
// against the dense GEMMs of the same total size.
void print_grouped_row(const Settings& st, DType dt, int64_t tokens, int64_t width,
                       int64_t experts) {
  const bench::GroupedTiming t =
      bench::time_grouped_fc1(dt, tokens, width, experts, st.rounds, st.min_time);
  const double g = t.flops / t.grouped / 1e9, d = t.flops / t.dense / 1e9;
  const std::string name = format("fc1 x{}", experts);
  if (st.json) {
    std::printf(
        "{\"layer\":\"moe\",\"op\":\"grouped\",\"experts\":%lld,\"m\":%lld,\"n\":%lld,"
        "\"k\":%lld,\"dtype\":\"%s\",\"device\":\"cpu\",\"ms\":%.4f,\"gflops\":%.1f,"
        "\"dense_gflops\":%.1f,\"ratio\":%.3f,\"cast_ms\":%.4f}\n",
        static_cast<long long>(experts), static_cast<long long>(tokens),
        static_cast<long long>(4 * width), static_cast<long long>(width),
        std::string(dtype_name(dt)).c_str(), t.grouped * 1e3, g, d, g / d, t.cast * 1e3);
  } else {
    std::printf("%-5s %-6s %6lld %6lld %6lld %-5s %-8s %10.3f %10.1f %10.1f %7.3f", "moe",
                name.c_str(), static_cast<long long>(tokens), static_cast<long long>(4 * width),
                static_cast<long long>(width), std::string(dtype_name(dt)).c_str(), "grouped",
                t.grouped * 1e3, g, d, g / d);
    if (t.cast > 0) std::printf("   + %.3f ms weight casts per step", t.cast * 1e3);
    std::printf("\n");
  }
  std::fflush(stdout);
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
                    "of the same shape, the kernel they run on.\n"
                    "With --device cuda the rows run on cuda:0 against a cublasLtMatmul called\n"
                    "directly with the same types (f32 accumulation, no TF32); each round is a\n"
                    "batch of calls (at least 10, after warm-up) timed with CUDA events, and\n"
                    "the median round of each is compared, in TFLOP/s. FP8 rows (--dtype fp8)\n"
                    "multiply per-tensor e4m3/e5m2 operands through kernels::quantized_gemm in\n"
                    "the TN layout Hopper's FP8 tensor cores need, against a direct cuBLASLt\n"
                    "FP8 matmul with the same settings, and end with their speedup over bf16.\n"
                    "Each cuda dtype ends with the epilogue rows (path `fused`): fc1 gelu is\n"
                    "fc1's forward with GELU_AUX_BIAS (pre-activation written beside), fc2 dgelu\n"
                    "fc2's dgrad with DGELU_BGRAD (fc1's bias gradient), fc1 bgrad fc1's wgrad\n"
                    "with BGRADB, each against a direct cublasLtMatmul with the same epilogue.\n"
                    "The last row per dtype (CPU) is a Mixture-of-Experts fc1: nn::GroupedLinear\n"
                    "with --experts experts of tokens/experts rows each, forward + backward (3\n"
                    "GEMMs per expert), against the 3 dense GEMMs of the same total size; its\n"
                    "`direct` column is the dense GFLOP/s and ms is per forward + backward. As\n"
                    "in training, the passes reuse the experts' bf16 weight casts, which are\n"
                    "made once per optimizer step: the bf16 row ends with their time apart.");
  opts.option("device", "cpu|cuda", "cpu", "where the GEMMs run (cuda: GPU 0, cuBLASLt)")
      .option("dtype", "f32|bf16|both|fp8|all", "both",
              "input type; fp8 (cuda): the bf16 rows, then per-tensor FP8 rows with their "
              "speedup over bf16; all: f32, bf16 and fp8")
      .option("tokens", "N", "2048", "tokens (batch x sequence) per GEMM")
      .option("width", "C", "768", "model width")
      .option("threads", "N", "0", "threads per call (0: all cores, or WEFT_NUM_THREADS)")
      .option("experts", "E", "8", "experts of the grouped (MoE) row; 0: no grouped row")
      .option("vocab", "V", "50304",
              "cuda: also the LM head's GEMMs over V vocabulary columns (GPT-2's padded "
              "vocabulary); 0: none")
      .option("rounds", "N", "30",
              "timing rounds per row, weft and direct alternating (the best of each is reported;"
              " on cuda the median)")
      .option("min-time", "SEC", "0",
              "minimum time of one round (0: one call per round; on cuda at least 10 calls)")
      .flag("json", "print one JSON object per row instead of the table");
  return opts;
}

int run(const std::vector<std::string>& args) {
  cli::Options opts = run_options();
  opts.parse(args);
  const std::string device = opts.choice("device", {"cpu", "cuda"});
  const std::string dtypes = opts.choice("dtype", {"f32", "bf16", "both", "fp8", "all"});
  const int64_t tokens = opts.integer("tokens"), width = opts.integer("width");
  WEFT_CHECK(tokens >= 1 && width >= 1, "--tokens and --width must be positive");
  const int threads = static_cast<int>(opts.integer("threads"));
  WEFT_CHECK(threads >= 0, "--threads must be >= 0");
  const int64_t experts = opts.integer("experts");
  const int64_t vocab = opts.integer("vocab");
  WEFT_CHECK(vocab >= 0, "--vocab must be 0 or positive, got {}", vocab);
  WEFT_CHECK(experts >= 0, "--experts must be >= 0");
  set_num_threads(threads);
  Settings st;
  st.rounds = static_cast<int>(std::max<int64_t>(1, opts.integer("rounds")));
  st.min_time = opts.number("min-time");
  st.json = opts.flag_set("json");
  st.cuda = device == "cuda";
  const bool fp8 = dtypes == "fp8" || dtypes == "all";
  WEFT_CHECK(!fp8 || st.cuda,
             "--dtype {} times cuBLASLt's FP8 GEMMs: add --device cuda (the CPU multiplies FP8 "
             "as an exact emulation, dequantized to f32: the f32 rows time that)",
             dtypes);
  // Throws (exit status 2) where this build has no CUDA backend or the
  // machine no GPU.
  if (st.cuda) cuda::check_device(Device::cuda(0));

  std::ostream& info = bench::info_stream(st.json);
  if (st.cuda) {
    info << "cuda: " << cuda::device_description(0) << "\n";
  } else {
    info << "cpu: " << kernels::describe_cpu_support() << "; threads per call: " << num_threads()
         << "\n";
  }
  std::vector<DType> types;
  if (dtypes == "f32" || dtypes == "both" || dtypes == "all") types.push_back(DType::f32);
  if (dtypes != "f32") types.push_back(DType::bf16);
  if (fp8) types.push_back(DType::e4m3);
  print_header(st);
  // The bf16 rate of each row, for the FP8 rows' speedup.
  std::map<std::string, double> bf16_seconds;
  std::vector<std::string> speedups;
#if WEFT_HAVE_CUDA
  const ExecContext gpu = st.cuda ? ExecContext::cuda(0) : ExecContext::host();
#endif
  for (DType dt : types) {
    std::vector<Row> rows = layer_gemms(tokens, width);
    if (st.cuda && vocab > 0) {
      for (const Row& r : head_gemms(tokens, width, vocab)) rows.push_back(r);
    }
    for (const Row& r : rows) {
#if WEFT_HAVE_CUDA
      if (st.cuda) {
        const std::string name = std::string(r.layer) + " " + r.op;
        const Timing t =
            dt == DType::e4m3 ? time_cuda_fp8_row(st, gpu, r) : time_cuda_row(st, gpu, r, dt);
        print_row(st, r, dt, t);
        if (dt == DType::bf16) bf16_seconds[name] = t.weft;
        if (dt == DType::e4m3 && bf16_seconds.count(name)) {
          speedups.push_back(format("{} {:.2f}x", name, bf16_seconds[name] / t.weft));
        }
        continue;
      }
#endif
      print_row(st, r, dt, time_cpu_row(st, r, dt));
    }
#if WEFT_HAVE_CUDA
    if (st.cuda && dt != DType::e4m3) {
      for (const EpilogueRow& er : epilogue_rows(tokens, width)) {
        Timing t;
        if (time_cuda_epilogue_row(st, gpu, er, dt, t)) {
          print_row(st, er.row, dt, t);
        } else {
          print_unfused_row(st, er.row, dt);
        }
      }
    }
#endif
    if (!st.cuda && experts > 0) print_grouped_row(st, dt, tokens, width, experts);
  }
  if (!speedups.empty() && !st.json) {
    std::printf("fp8 / bf16 speed (same run):");
    for (const std::string& x : speedups) std::printf(" %s;", x.c_str());
    std::printf("\n");
  }
  return 0;
}

cli::Register reg("bench gemm",
                  "time the GEMMs of a GPT-2-small layer against direct oneDNN or cuBLASLt",
                  run_options, run);

}  // namespace
}  // namespace weft
