// Which overlap algorithm each GEMM of a transformer layer uses, as
// Transformer Engine's comm-GEMM overlap configuration.
//
// GEMMs are named <layer>_<pass>: layer is qkv, proj, fc1 or fc2, pass is
// fprop, dgrad or wgrad ("fc2_fprop"). Methods:
//   ring      ring exchange: all-gather + GEMM, or GEMM + reduce-scatter, one
//             chunk per rank, the transfer of the next chunk beside the GEMM of
//             the present one (sequence parallelism only);
//   pipeline  the GEMM split into num_splits row chunks, the reduce-scatter (or,
//             without SP, all-reduce) of chunk i beside the GEMM of chunk i+1;
//   bulk      an independent collective beside the GEMM (backward: the input
//             re-gather beside dgrad, the dgrad reduce-scatter beside wgrad);
//   off       the collective, then the GEMM (or the reverse), nothing beside.
// The defaults are Transformer Engine's: ring for qkv/fc1 fprop and proj/fc2
// dgrad, pipeline for proj/fc2 fprop, bulk for qkv/fc1 dgrad and wgrad. A
// method that does not apply (TP 1, no collective, no SP for ring, a chunk
// too small to split) falls back to the plain schedule.
//
// Cores for communication. On the CPU a transfer is work: the local backend's
// worker and the MPI progress thread copy the bytes while the GEMM runs. An
// overlapped GEMM (ring, pipeline, or a bulk GEMM with a collective in flight)
// runs on comm_cores fewer threads than the rank's team (at least one), as
// Transformer Engine leaves num_sm SMs to its userbuffers kernels.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace weft::parallel {

enum class OverlapMethod : uint8_t { off, ring, pipeline, bulk };
const char* overlap_method_name(OverlapMethod m);

struct OverlapChoice {
  OverlapMethod method = OverlapMethod::off;
  int num_splits = 4;  // pipeline: row chunks per GEMM
  // Threads the GEMM leaves to the collective beside it (the configuration's
  // comm_cores, filled in by OverlapConfig::choice).
  int comm_cores = 0;
  friend bool operator==(const OverlapChoice&, const OverlapChoice&) = default;
};

class OverlapConfig {
 public:
  // Everything off (the default of a context).
  OverlapConfig() = default;
  // Transformer Engine's defaults.
  static OverlapConfig defaults();
  // Every GEMM off, backward included: each collective on its own, nothing
  // beside it (what "off" means when the backward's bulk overlap, which a
  // context without a configuration keeps, is to be measured too).
  static OverlapConfig none();
  // "" or "off": no configuration (backward keeps Megatron's bulk overlap);
  // "none": none(); "on" or "default": defaults(); otherwise a
  // comma-separated list applied over the defaults, "qkv_fprop=ring,
  // fc2_fprop=pipeline:8, proj_dgrad=off" (pipeline takes :num_splits).
  // (The CLI also reads a JSON file of the same choices.) Errors name the bad
  // entry and the choices.
  static OverlapConfig parse(std::string_view text);

  bool enabled() const { return enabled_; }
  // The choice for a GEMM ("fc1_fprop"); off for unknown names and when disabled.
  OverlapChoice choice(const std::string& gemm) const;
  void set(const std::string& gemm, OverlapChoice c);
  // "qkv_fprop=ring,..." (every GEMM, in a fixed order, then comm_cores when
  // not 0), or "off".
  std::string str() const;

  // Threads an overlapped GEMM leaves to communication ("comm_cores=N" in the
  // text, "comm_cores" in a JSON file). Default 0: the GEMM keeps every
  // thread and the transfer threads share the cores (measured in README,
  // "Communication-GEMM overlap").
  int comm_cores() const { return comm_cores_; }
  // Throws unless 0 <= n <= 1024.
  void set_comm_cores(int n);

 private:
  bool enabled_ = false;
  int comm_cores_ = 0;
  std::map<std::string, OverlapChoice> choices_;
};

// Throws naming the choices unless `name` is one of overlap_gemm_names().
void check_overlap_gemm_name(const std::string& name);
// "ring", "pipeline", "bulk" or "off"; `where` names the entry in errors.
OverlapMethod parse_overlap_method(std::string_view s, std::string_view where);

// Says once per process and GEMM (on stderr) that `method` does not apply to
// `gemm` and the plain schedule runs instead, and why.
void note_overlap_fallback(const std::string& gemm, OverlapMethod method, const char* why);
// The notes said so far (tests).
std::vector<std::string> overlap_fallback_notes();

// The GEMM names, in order: qkv_fprop, qkv_dgrad, qkv_wgrad, proj_fprop, ...
const std::vector<std::string>& overlap_gemm_names();

}  // namespace weft::parallel
