// weft bench optim: the optimizer step's two passes over a preset model's
// parameters — AdamW and the gradient norm's sums of squares — as one
// multi-tensor pass (what training runs) against one kernel call per
// parameter, alternating in one run.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "../cli.h"
#include "timing.h"
#include "weft/comm/grid.h"
#include "weft/comm/local.h"
#include "weft/core/threads.h"
#include "weft/kernels/cpu_support.h"
#include "weft/kernels/optimizer.h"
#include "weft/nn/gpt.h"
#include "weft/optim/adamw.h"
#include "weft/optim/grad_norm.h"

namespace weft {
namespace {

cli::Options run_options() {
  cli::Options opts("weft bench optim [options]",
                    "Times the optimizer's passes over the parameters of a preset model (TP=1, on\n"
                    "the host): the AdamW step over flat moment buffers in one multi-tensor call\n"
                    "(optim::AdamW, as training runs it) against one AdamW kernel call per\n"
                    "parameter, and the gradient norm's sums of squares in one pass\n"
                    "(optim::global_grad_norm) against one call per parameter. Rounds alternate\n"
                    "the four; medians are reported. Bandwidth counts the bytes a pass must move:\n"
                    "AdamW reads weight, gradient and both moments and writes weight and moments\n"
                    "(28 bytes per element), the norm reads the gradient (4).");
  opts.option(
          "preset", "NAME", "gpt2-124m",
          "model preset: " +
              [] {
                std::string names;
                for (const std::string& n : nn::gpt_preset_names()) {
                  names += (names.empty() ? "" : ", ") + n;
                }
                return names;
              }())
      .option("threads", "N", "0", "threads per call (0: all cores, or WEFT_NUM_THREADS)")
      .option("rounds", "N", "7", "timing rounds (the median is reported)")
      .flag("json", "print one JSON object per row instead of the table");
  return opts;
}

struct Row {
  const char* name;
  double bytes_per_element;
  double seconds;
  double per_parameter_seconds;  // the row it is compared with (itself for a baseline)
};

void print_row(const Row& r, int64_t elements, bool json) {
  const double gbps = r.bytes_per_element * static_cast<double>(elements) / r.seconds / 1e9;
  const double speedup = r.per_parameter_seconds / r.seconds;
  if (json) {
    std::printf("{\"pass\":\"%s\",\"ms\":%.4f,\"gbps\":%.2f,\"speedup\":%.3f}\n", r.name,
                r.seconds * 1e3, gbps, speedup);
  } else {
    std::printf("%-24s %9.3f %9.2f %9.3f\n", r.name, r.seconds * 1e3, gbps, speedup);
  }
  std::fflush(stdout);
}

// The four passes over `params` alternating round by round; their medians.
std::vector<double> time_passes(const std::vector<nn::Parameter*>& params, int rounds) {
  const ExecContext& ec = ExecContext::host();
  optim::AdamW flat(params, {});
  std::vector<Tensor> m, v;
  for (const nn::Parameter* p : params) {
    m.push_back(ec.zeros(p->value.shape()));
    v.push_back(ec.zeros(p->value.shape()));
  }
  int64_t step = 0;
  auto per_parameter_adamw = [&] {
    ++step;
    for (size_t i = 0; i < params.size(); ++i) {
      nn::Parameter& p = *params[i];
      kernels::adamw_step(ec, p.value, p.grad, m[i], v[i],
                          {.lr = 1e-6f, .weight_decay = p.decay ? 0.1f : 0.0f, .step = step});
    }
  };
  double sink = 0;  // keeps the sums from being optimized away
  auto per_parameter_norm = [&] {
    for (const nn::Parameter* p : params) sink += kernels::sum_of_squares(ec, p->grad);
  };
  const std::vector<std::function<void()>> passes = {
      per_parameter_adamw, [&] { flat.step(1e-6f); }, per_parameter_norm,
      [&] { sink += optim::global_grad_norm(params, {}); }};
  for (const auto& pass : passes) pass();  // first touch
  std::vector<std::function<double()>> timed;
  for (const auto& pass : passes) timed.push_back([&pass] { return bench::seconds(pass); });
  const auto samples = bench::alternate(rounds, timed, bench::Order::rotating);
  std::vector<double> medians;
  for (const auto& s : samples) medians.push_back(bench::median(s));
  if (sink < 0) std::printf("\n");
  return medians;
}

int run(const std::vector<std::string>& args) {
  cli::Options opts = run_options();
  opts.parse(args);
  const int threads = static_cast<int>(opts.integer("threads"));
  WEFT_CHECK(threads >= 0, "--threads must be >= 0 (0: all cores), got {}", threads);
  const int rounds = static_cast<int>(std::max<int64_t>(1, opts.integer("rounds")));
  const bool json = opts.flag_set("json");
  const nn::GptConfig cfg = nn::gpt_preset(opts.str("preset"));
  comm::run_local(1, [&](comm::ProcessGroup& world) {
    set_num_threads(threads);
    comm::Grid grid(world, "tp-dp", {{"tp", 1}});
    nn::Gpt model(parallel::make_context(grid.group_ptr("tp")), cfg);
    const std::vector<nn::Parameter*> params = model.parameters();
    int64_t elements = 0;
    for (nn::Parameter* p : params) {
      p->grad.fill(1e-3f);
      elements += p->value.numel();
    }
    bench::info_stream(json) << "cpu: " << kernels::describe_cpu_support()
                             << "; threads per call: " << num_threads() << "; "
                             << opts.str("preset") << ": " << params.size() << " parameters, "
                             << elements << " elements\n";
    const std::vector<double> t = time_passes(params, rounds);
    if (!json) {
      std::printf("%-24s %9s %9s %9s\n", "pass", "ms", "GB/s", "speedup");
    }
    print_row({"adamw per parameter", 28, t[0], t[0]}, elements, json);
    print_row({"adamw flat", 28, t[1], t[0]}, elements, json);
    print_row({"norm per parameter", 4, t[2], t[2]}, elements, json);
    print_row({"norm one pass", 4, t[3], t[2]}, elements, json);
  });
  return 0;
}

cli::Register reg("bench optim",
                  "time AdamW and the gradient norm in one pass against one call per parameter",
                  run_options, run);

}  // namespace
}  // namespace weft
