// weft bench attention: the fused attention kernels' forward and backward on
// one layer's shape (GPT-2 small by default), in ms and TFLOP/s.
#include "weft/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "../cli.h"
#include "attention_cp.h"
#include "timing.h"
#include "weft/core/cuda.h"
#include "weft/core/exec_context.h"
#include "weft/core/tensor.h"
#include "weft/core/threads.h"
#include "weft/kernels/cpu_support.h"
#include "weft/kernels/random.h"

namespace weft {
namespace {

cli::Options run_options() {
  cli::Options opts("weft bench attention [options]",
                    "Times attention_forward and attention_backward (kernels/attention.h) on\n"
                    "one layer's shape: qkv (B, T, 3·H·D), causal. Each round runs --iters\n"
                    "calls between device synchronizations; the median round is reported.\n"
                    "TFLOP/s counts the products a kernel must do (forward Q·Kᵀ and P·V,\n"
                    "backward those recomputed plus dV, dP, dQ, dK: 2.5x the forward), halved\n"
                    "under the causal mask; each line names the kernels that ran. On cuda,\n"
                    "where cuDNN's fused attention takes the shape, cuDNN and weft's own\n"
                    "kernels are timed alternately in the same run, with their time ratio and\n"
                    "how far their results lie apart (random inputs). With --cp N (CPU):\n"
                    "context-parallel attention at total length T on N rank threads against\n"
                    "the single rank at T, measured in the same run.");
  opts.option("device", "cpu|cuda", "cuda", "where the kernels run (cuda: GPU 0)")
      .option("dtype", "f32|bf16", "bf16", "qkv and gradient type")
      .option("batch", "B", "16", "sequences")
      .option("seq", "T", "1024", "positions per sequence")
      .option("heads", "H", "12", "heads")
      .option("head-dim", "D", "64", "dimensions per head")
      .option("dropout", "P", "0", "attention dropout probability")
      .option("iters", "N", "10", "calls per round")
      .option("rounds", "N", "5", "timing rounds (the median is reported)")
      .option("cp", "N", "1",
              "context parallelism: split each sequence over N rank threads (cpu; --seq "
              "divisible by 2N)")
      .option("cp-comm", "p2p|allgather|a2a", "p2p", "the exchange under --cp");
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
  if (opts.integer("cp") != 1) {
    const int64_t cp = opts.integer("cp");
    WEFT_CHECK(cp >= 1 && cp <= 64, "--cp must lie in [1, 64], got {}", cp);
    WEFT_CHECK(!on_cuda, "--cp runs its ranks on the CPU: pass --device cpu");
    const parallel::context::CpComm comm =
        parallel::context::parse_cp_comm(opts.choice("cp-comm", {"p2p", "allgather", "a2a"}));
    parallel::context::check_heads(comm, static_cast<int>(cp), H, H);
    bench::context_parallel_attention({.cp = static_cast<int>(cp),
                                       .comm = comm,
                                       .dtype = dt,
                                       .batch = B,
                                       .seq = T,
                                       .heads = H,
                                       .head_dim = D,
                                       .dropout = static_cast<float>(opts.number("dropout")),
                                       .rounds = rounds});
    return 0;
  }
  // Throws (exit status 2) where this build has no CUDA backend or the
  // machine no GPU.
  if (on_cuda) cuda::check_device(Device::cuda(0));
  const ExecContext ec = on_cuda ? ExecContext::cuda(0) : ExecContext::host();

  if (on_cuda) {
    std::cout << "cuda: " << cuda::device_description(0)
              << "; cuDNN attention: " << kernels::attention_cudnn_status(ec.device()) << "\n";
  } else {
    std::cout << "cpu: " << kernels::describe_cpu_support() << "; threads: " << num_threads()
              << "\n";
  }
  kernels::AttentionConfig cfg;
  cfg.heads = H;
  cfg.dropout = static_cast<float>(opts.number("dropout"));
  cfg.seed = 1;
  const int64_t C = H * D;
  // Random inputs (uniform in [0, 1)): constants would hide wrong indexing.
  auto random = [&](Shape shape, uint64_t seed) {
    Tensor u = ec.empty({shape.numel()}, DType::f32);
    kernels::fill_uniform(ec, seed, 0, u);
    return u.to(dt).reshape(shape);
  };
  const Tensor qkv = random({B, T, 3 * C}, 11), dout = random({B, T, C}, 12);

  // Each set of kernels that may run this shape: on a GPU where cuDNN takes
  // it, cuDNN and weft's own kernels, timed alternately in the same run.
  struct Path {
    kernels::AttentionConfig cfg;
    Tensor out, dqkv;
    kernels::AttentionSaved saved;
    kernels::AttentionWorkspace workspace;
  };
  std::vector<Path> paths(1);
  paths[0].cfg = cfg;
  if (kernels::attention_path(ec.device(), dt, D, cfg) == std::string("cuDNN")) {
    paths.emplace_back();
    paths[1].cfg = cfg;
    paths[1].cfg.cudnn = false;
  }
  std::vector<std::function<double()>> timers;
  // Each round: --iters calls of each, the device drained before and after.
  auto sync = [&] { ec.synchronize(); };
  for (Path& p : paths) {
    p.out = ec.empty({B, T, C}, dt);
    p.dqkv = ec.empty({B, T, 3 * C}, dt);
    auto forward = [&] { kernels::attention_forward(ec, qkv, p.cfg, p.out, p.saved, p.workspace); };
    auto backward = [&] {
      kernels::attention_backward(ec, dout, qkv, p.saved, p.cfg, p.dqkv, p.workspace);
    };
    forward();
    backward();
    timers.push_back([=] { return bench::seconds_per_call(forward, iters, sync); });
    timers.push_back([=] { return bench::seconds_per_call(backward, iters, sync); });
  }
  const auto samples = bench::alternate(rounds, timers);
  // Q·Kᵀ and P·V: 2·T·T·D multiply-adds each per head, half under the mask.
  const double flops = 4.0 * static_cast<double>(B * H) * static_cast<double>(T) *
                       static_cast<double>(T) * static_cast<double>(D) / 2.0;
  std::vector<double> fwd, bwd;
  for (size_t i = 0; i < paths.size(); ++i) {
    const double f = bench::upper_median(samples[2 * i]),
                 b = bench::upper_median(samples[2 * i + 1]);
    fwd.push_back(f);
    bwd.push_back(b);
    std::printf(
        "attention %s B=%lld T=%lld H=%lld D=%lld dropout=%g (%s): forward %.3f ms "
        "(%.2f TFLOP/s), backward %.3f ms (%.2f TFLOP/s)\n",
        std::string(dtype_name(dt)).c_str(), static_cast<long long>(B), static_cast<long long>(T),
        static_cast<long long>(H), static_cast<long long>(D), static_cast<double>(cfg.dropout),
        paths[i].saved.kernels, f * 1e3, flops / f / 1e12, b * 1e3, 2.5 * flops / b / 1e12);
  }
  if (paths.size() == 2) {
    // How far the two paths' results lie apart: ‖a − b‖ / ‖b‖ over out and dqkv.
    auto rel = [](const Tensor& a, const Tensor& b) {
      const Tensor x = a.to(Device::cpu()).to(DType::f32), y = b.to(Device::cpu()).to(DType::f32);
      const float* px = x.data<float>();
      const float* py = y.data<float>();
      double num = 0, den = 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        num += (double(px[i]) - py[i]) * (double(px[i]) - py[i]);
        den += double(py[i]) * py[i];
      }
      return std::sqrt(num / std::max(den, 1e-300));
    };
    std::printf(
        "%s / %s time: forward %.2fx, backward %.2fx; results apart by %.1e (out), %.1e (dqkv)\n",
        paths[0].saved.kernels, paths[1].saved.kernels, fwd[0] / fwd[1], bwd[0] / bwd[1],
        rel(paths[0].out, paths[1].out), rel(paths[0].dqkv, paths[1].dqkv));
  }
  return 0;
}

cli::Register reg("bench attention", "time the fused attention kernels on one layer's shape",
                  run_options, run);

}  // namespace
}  // namespace weft
