// The machine a plan is for: this CPU, measured by quick probes (cached), or
// a GPU cluster, described.
//
// CPU. Three probes run once per (processor model, threads per rank, dtype)
// and are cached in ~/.cache/weft/plan-probes.json ($WEFT_CACHE_DIR, else
// $XDG_CACHE_HOME/weft, replaces the folder): weft's GEMM at two sizes (an
// 8³ and a 512³ product: a call's fixed cost and the peak rate, the curve
// of Machine::gemm_rate; the fixed cost is every kernel call's), a
// memcpy of 64 MiB (the local backend's collectives are copies between the
// ranks' buffers) and the latency of a small all-reduce between two local
// ranks (under a lock on the cache folder: processes started together probe
// once and read the same figures, so an mpirun job's ranks choose the same
// layout). The local backend runs its ranks as threads sharing the cores:
// each rank gets cores / world threads, and ranks beyond the cores share them.
//
// GPU. A cluster description (--cluster FILE), a JSON object whose keys are
// all optional, the defaults an H100 SXM cluster's:
//   name                  "H100 SXM, 8 per node (NVLink 4, 400 Gb/s InfiniBand per GPU)"
//   gpus_per_node         8
//   peak_tflops           989.4   dense bf16 per GPU (NVIDIA's data sheet)
//   gemm_efficiency       0.7     share of the peak large bf16 GEMMs reach
//   gemm_half_gflops      2       the product size (GFLOP) at which a GEMM reaches half that
//   attention_efficiency  0.45    share of the peak fused attention reaches
//   hbm_GBps              3350    memory bandwidth per GPU
//   nvlink_GBps           450     per GPU and direction, within a node
//   network_GBps          50      per GPU and direction, across nodes (400 Gb/s)
//   latency_us            10      per collective
//   kernel_launch_us      4       per kernel outside the GEMMs (fixed cost)
#pragma once

#include <string>

#include "weft/core/dtype.h"
#include "weft/plan/cost_model.h"

namespace weft::plan {

// The rates of this CPU for `world` local ranks computing in `dtype`
// (probes run now unless cached).
Machine cpu_machine(DType dtype, int world);

// A cluster description (the text of a --cluster file; `source` names it in
// errors): unknown keys, values that are not positive numbers and a
// gpus_per_node below 1 are a weft::Error naming the key.
Machine parse_cluster(const std::string& text, const std::string& source);
// The defaults alone (an H100 SXM cluster).
Machine default_gpu_cluster();

// The folder probes are cached in.
std::string probe_cache_dir();

}  // namespace weft::plan
