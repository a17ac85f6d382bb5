// weft bench attention: the fused attention kernels' forward and backward on
// one layer's shape (GPT-2 small by default), in ms and TFLOP/s.
#include "weft/kernels/attention.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "../cli.h"
#include "timing.h"
#include "weft/core/cuda.h"
#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"
#include "weft/core/threads.h"
#include "weft/kernels/cpu_support.h"

namespace weft {
namespace {

cli::Options run_options() {
  cli::Options opts("weft bench attention [options]",
                    "Times attention_forward and attention_backward (kernels/attention.h) on\n"
                    "one layer's shape: qkv (B, T, 3·H·D), causal. Each round runs --iters\n"
                    "calls between device synchronizations; the median round is reported.\n"
                    "TFLOP/s counts the products a kernel must do (forward Q·Kᵀ and P·V,\n"
                    "backward those recomputed plus dV, dP, dQ, dK: 2.5x the forward), halved\n"
                    "under the causal mask; on cuda the line names the kernels that ran.");
  opts.option("device", "cpu|cuda", "cuda", "where the kernels run (cuda: GPU 0)")
      .option("dtype", "f32|bf16", "bf16", "qkv and gradient type")
      .option("batch", "B", "16", "sequences")
      .option("seq", "T", "1024", "positions per sequence")
      .option("heads", "H", "12", "heads")
      .option("head-dim", "D", "64", "dimensions per head")
      .option("dropout", "P", "0", "attention dropout probability")
      .option("iters", "N", "10", "calls per round")
      .option("rounds", "N", "5", "timing rounds (the median is reported)");
  return opts;
}

int run(const std::vector<std::string>& args) {
  cli::Options opts = run_options();
  opts.parse(args);
  const bool on_cuda = opts.choice("device", {"cpu", "cuda"}) == "cuda";
  const DType dt = opts.choice("dtype", {"f32", "bf16"}) == "bf16" ? DType::bf16 : DType::f32;
  const int64_t B = opts.integer("batch"), T = opts.integer("seq"), H = opts.integer("heads"),
                D = opts.integer("head-dim");
  WEFT_CHECK(B >= 1 && T >= 1 && H >= 1 && D >= 1,
             "--batch, --seq, --heads and --head-dim must be positive");
  const int iters = static_cast<int>(std::max<int64_t>(1, opts.integer("iters")));
  const int rounds = static_cast<int>(std::max<int64_t>(1, opts.integer("rounds")));
  // Throws (exit status 2) where this build has no CUDA backend or the
  // machine no GPU.
  if (on_cuda) cuda::check_device(Device::cuda(0));
  const ExecContext ec = on_cuda ? ExecContext::cuda(0) : ExecContext::host();

  const std::string path = kernels::attention_path(ec.device(), dt, D);
  if (on_cuda) {
    std::cout << "cuda: " << cuda::device_description(0) << "\n";
  } else {
    std::cout << "cpu: " << kernels::describe_cpu_support() << "; threads: " << num_threads()
              << "\n";
  }
  kernels::AttentionConfig cfg;
  cfg.heads = H;
  cfg.dropout = static_cast<float>(opts.number("dropout"));
  cfg.seed = 1;
  const int64_t C = H * D;
  Tensor qkv = ec.empty({B, T, 3 * C}, dt), dout = ec.empty({B, T, C}, dt);
  Tensor out = ec.empty({B, T, C}, dt), dqkv = ec.empty({B, T, 3 * C}, dt);
  qkv.fill(0.01f);
  dout.fill(0.02f);
  kernels::AttentionSaved saved;
  kernels::AttentionWorkspace workspace;
  auto forward = [&] { kernels::attention_forward(ec, qkv, cfg, out, saved, workspace); };
  auto backward = [&] { kernels::attention_backward(ec, dout, qkv, saved, cfg, dqkv, workspace); };
  forward();
  backward();
  // Each round: --iters calls of each, the device drained before and after.
  auto sync = [&] { ec.synchronize(); };
  const auto samples =
      bench::alternate(rounds, {[&] { return bench::seconds_per_call(forward, iters, sync); },
                                [&] { return bench::seconds_per_call(backward, iters, sync); }});
  // Q·Kᵀ and P·V: 2·T·T·D multiply-adds each per head, half under the mask.
  const double flops = 4.0 * static_cast<double>(B * H) * static_cast<double>(T) *
                       static_cast<double>(T) * static_cast<double>(D) / 2.0;
  const double f = bench::upper_median(samples[0]), b = bench::upper_median(samples[1]);
  std::printf(
      "attention %s B=%lld T=%lld H=%lld D=%lld dropout=%g (%s): forward %.3f ms "
      "(%.2f TFLOP/s), backward %.3f ms (%.2f TFLOP/s)\n",
      std::string(dtype_name(dt)).c_str(), static_cast<long long>(B), static_cast<long long>(T),
      static_cast<long long>(H), static_cast<long long>(D), static_cast<double>(cfg.dropout),
      path.c_str(), f * 1e3, flops / f / 1e12, b * 1e3, 2.5 * flops / b / 1e12);
  return 0;
}

cli::Register reg("bench attention", "time the fused attention kernels on one layer's shape",
                  run_options, run);

}  // namespace
}  // namespace weft
