// The memory model of a layout: the bytes one rank holds at its peak, by
// what holds them, predicted from the model's shape without building it.
//
// Each term follows how weft allocates (the MemoryTracker's tags, which is
// what it predicts):
//   parameters     f32 master weights: this rank's TP / GTP / EP / stage share
//                  (params)
//   gradients      one f32 gradient per parameter, kept in the data-parallel
//                  gradient buckets (optim/grad_sync.h): the buckets are the
//                  gradients, so they are no extra communication buffer;
//                  GTP with --gtp-grad-accum full adds full-size f32 sums
//                  (grads)
//   optimizer      AdamW's two f32 moments, each parameter's stretch padded
//                  to 16 elements (optim/adamw.h); sharded over cp x dp by the
//                  distributed optimizer (optimizer)
//   activations    what the forward saves for the backward (nn/'s Saved
//                  structs), per micro-batch in flight on the stage (the
//                  pipeline schedule's bound) and per recompute mode, plus
//                  the largest transient of the step (activations)
//   workspaces     the rank's shared scratch buffers (parallel/workspace.h:
//                  gathered inputs, unreduced partial sums) and the staging
//                  copies of the mappings (comm)
//   comm_buffers   context parallelism's K/V ring buffers (comm)
//   weight_cache   the compute-dtype copies of the weights (bf16 casts), the
//                  GTP cache of gathered weights (weight_cache)
// The terms for pp, vpp, cp, the distributed optimizer and recomputation
// follow Megatron-LM and Korthikanti et al., "Reducing Activation
// Recomputation in Large Transformer Models" (2022): in-flight micro-batches
// per schedule, the input of each fully recomputed layer, the attention core
// dropped by selective recomputation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/core/dtype.h"
#include "weft/nn/gpt.h"
#include "weft/plan/layout.h"

namespace weft::plan {

// What is trained, apart from the layout.
struct Workload {
  nn::GptConfig model{};       // the shape; model.seq is the sequence length
  DType compute = DType::f32;  // the activations' type (f32 or bf16)
  bool quantized = false;      // an FP8 / MXFP8 / NVFP4 recipe (the CPU multiplies f32 operands)
  bool gpu = false;            // CUDA: fused attention keeps no probabilities
  double bucket_mb = 25;       // data-parallel gradient bucket (MiB)
  int gtp_cache = 2;           // GTP: gathered weights alive at once
  bool gtp_grad_accum_full = false;
};

struct MemoryBreakdown {
  int64_t parameters = 0;
  int64_t gradients = 0;
  int64_t optimizer = 0;
  int64_t activations = 0;
  int64_t workspaces = 0;
  int64_t comm_buffers = 0;
  int64_t weight_cache = 0;
  int64_t total() const {
    return parameters + gradients + optimizer + activations + workspaces + comm_buffers +
           weight_cache;
  }
};

// The parameters one rank holds, in elements, by kind.
struct ParameterCount {
  int64_t sharded = 0;     // weights a weight source hands out (GTP shards them)
  int64_t replicated = 0;  // norms, biases, learned positions
  int64_t tensors = 0;     // how many parameters (the optimizer pads each)
  int64_t total() const { return sharded + replicated; }
};

// The layers of each pipeline stage: balanced, the first stages taking the
// remainder; when the layers and the embedding and head together (layers +
// 2) divide evenly, the first and last stage hold one layer fewer (Megatron's
// account-for-embedding/loss split, Llama 3 405B's 126 layers on 16 stages).
std::vector<int64_t> stage_layers(int64_t layers, int pp);

// Micro-batches whose activations a stage holds at once (Megatron's bounds):
// GPipe M; 1F1B and zero-bubble (ZB-H1) min(P - stage, M); interleaved, in
// units of a whole stage's layers, the warm-up of (P - stage - 1)·2 +
// (V - 1)·P + 1 model chunks of L/(P·V) layers each, at most M·V chunks.
double micro_batches_in_flight(const Layout& layout, int stage);

class MemoryModel {
 public:
  explicit MemoryModel(Workload workload);

  // The parameters of pipeline stage `stage` on one rank (the largest
  // share: TP rank 0, the expert-parallel rank with the most experts).
  ParameterCount parameters(const Layout& layout, int stage) const;
  // The saved activations of one transformer layer for one micro-batch
  // (bytes), per recompute mode; the layer is a MoE layer when `moe`.
  int64_t layer_activations(const Layout& layout, bool moe, Recompute mode) const;
  // One rank of stage `stage` at its peak.
  MemoryBreakdown rank(const Layout& layout, int stage) const;
  // The stage whose rank peaks highest, and that rank's breakdown.
  MemoryBreakdown peak(const Layout& layout, int* stage = nullptr) const;

  const Workload& workload() const { return w_; }

 private:
  // Rows of the residual stream a rank holds per micro-batch (sequence
  // parallelism and context parallelism shard them) and inside the TP
  // regions.
  int64_t residual_rows(const Layout& layout) const;
  int64_t region_rows(const Layout& layout) const;
  int64_t outside_layers_activations(const Layout& layout, int stage) const;
  int64_t transient(const Layout& layout, int stage) const;

  Workload w_;
};

// "1.5 GiB", "320 MiB": bytes for tables.
std::string format_bytes(int64_t bytes);
// "40GiB", "40G", "1.5GiB", "512MiB", "80GB" (10^9), "1000000": bytes. Bad
// text is a weft::Error naming `option`.
int64_t parse_memory_size(const std::string& text, const std::string& option);

}  // namespace weft::plan
