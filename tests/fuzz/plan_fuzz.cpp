// What `weft plan` reads from a user: a --cluster description, an --evaluate
// layout and a --memory-limit. The input is tried as each. A layout that
// parses and suits the tiny model is priced by the memory and cost models,
// whose results must be finite and not negative, and whose options must
// parse back to the same layout.
#include <cmath>
#include <cstdlib>
#include <string>

#include "fuzz.h"
#include "weft/plan/machine.h"
#include "weft/plan/search.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace wp = weft::plan;
  const std::string text(reinterpret_cast<const char*>(data), size);
  weft::fuzz::refused_ok([&] { (void)wp::parse_cluster(text, "cluster.json"); });
  weft::fuzz::refused_ok([&] { (void)wp::parse_memory_size(text, "--memory-limit"); });
  weft::fuzz::refused_ok([&] {
    const wp::Layout l = wp::parse_layout_args(text);
    if (!(wp::parse_layout_args(l.args()).args() == l.args())) std::abort();
    wp::Workload w;
    w.model = weft::nn::gpt_preset("tiny");
    if (l.micro_batch * l.grad_accum > 4096) return;
    if (!wp::layout_problem(w, l, l.world(), l.global_batch()).empty()) return;
    const wp::MemoryBreakdown m = wp::MemoryModel(w).peak(l);
    const wp::StepCost c = wp::predict_step(w, l, wp::default_gpu_cluster());
    if (m.total() <= 0 || m.activations < 0 || !(c.total > 0) || !std::isfinite(c.tokens_per_s)) {
      std::abort();
    }
  });
  return 0;
}
