// Linear: y = x·Wᵀ + b with W (out, in), optionally tensor-parallel.
//
//   none    every rank holds W; no communication.
//   column  W split by output rows: each rank holds out/T rows (and that part
//           of b); x -> copy_to_tp -> local GEMM -> [gather_from_tp].
//   row     W split by input columns: each rank holds in/T columns; x (local
//           features) -> local GEMM -> reduce_from_tp -> + b (replicated).
// Sequence parallelism (seq: dim 1 of (B, T, C); batch: dim 0) replaces the
// TP-boundary mappings: column gathers its input along the SP dimension
// (gather_from_sp) and row reduce-scatters its output (reduce_scatter_to_sp),
// so activations outside the pair stay sharded.
//
// Initialization is TP-invariant: every rank draws the full master weight from
// (seed, name) and keeps its slice, so shards are bit-identical to slices of
// the TP=1 weight. `out_groups` > 1 splits the output rows into that many
// equal groups and shards each group separately (fused QKV: each rank holds
// its heads' q, k and v rows, laid out [q | k | v] locally too).
#pragma once

#include <cmath>
#include <memory>
#include <string>

#include "weft/comm/process_group.h"
#include "weft/nn/module.h"

namespace weft::nn {

enum class Parallel { none, column, row };
enum class SequenceParallel { off, seq, batch };

const char* sequence_parallel_name(SequenceParallel sp);
SequenceParallel parse_sequence_parallel(const std::string& s);  // "off", "seq", "batch"
// The activation dimension SP splits: 1 for seq, 0 for batch.
int sp_dim(SequenceParallel sp);

struct LinearConfig {
  std::string name{};  // parameters become <name>.weight / <name>.bias
  int64_t in = 0, out = 0;
  Parallel mode = Parallel::none;
  bool bias = true;
  std::shared_ptr<comm::ProcessGroup> tp{};  // null: no tensor parallelism
  bool gather_output = false;                // column: return full output features
  bool input_is_parallel = true;             // row: input holds this rank's in/T features
  SequenceParallel sp = SequenceParallel::off;
  DType compute = DType::f32;  // f32 or bf16 (weights cast per call, f32 master)
  uint64_t seed = 0;
  float init_std = 0.02f;
  int64_t out_groups = 1;
};

class Linear : public Module {
 public:
  explicit Linear(LinearConfig cfg);

  // x (..., in or in/T) -> y (..., out or out/T)
  Tensor forward(Ctx& ctx, const Tensor& x) override;
  Tensor backward(Ctx& ctx, const Tensor& dy) override;
  std::vector<Parameter*> own_parameters() override;

  const LinearConfig& config() const { return cfg_; }
  Parameter& weight() { return weight_; }
  Parameter* bias() { return cfg_.bias ? &bias_ : nullptr; }
  int tp_size() const { return cfg_.tp ? cfg_.tp->size() : 1; }
  int64_t local_in() const;
  int64_t local_out() const;

  // The GEMM parts alone, for modules that run their own mappings (LayerNormLinear):
  // x (N, local_in) -> y (N, local_out), bias added unless row-parallel.
  Tensor gemm_forward(const Tensor& x);
  // dy (N, local_out), x (N, local_in) -> dx (N, local_in); dW, db accumulate.
  Tensor gemm_backward(const Tensor& dy, const Tensor& x, bool need_dx = true);

 private:
  struct Saved {
    Tensor x;  // the GEMM input (gathered under SP)
  };
  comm::ProcessGroup* group() const { return cfg_.tp.get(); }

  LinearConfig cfg_;
  Parameter weight_, bias_;
  // The weight in the compute dtype: the master itself for f32, a bf16 copy
  // made by forward (weights do not change between forward and backward).
  Tensor weight_compute_;
};

// The Linear that closes a residual branch of a block (attention's proj, the
// MLP's fc2): row-parallel over the block's tp when the block is partitioned,
// so that it takes the split hidden state as it is, and initialized with
// std/√(2·layers) as in GPT-2. Block: a config with tp, sp, compute, seed,
// init_std and layers.
template <typename Block>
LinearConfig residual_projection(const Block& block, bool partitioned, std::string name, int64_t in,
                                 int64_t out) {
  return {.name = std::move(name),
          .in = in,
          .out = out,
          .mode = partitioned ? Parallel::row : Parallel::none,
          .bias = true,
          .tp = block.tp,
          .gather_output = false,
          .input_is_parallel = true,
          .sp = block.sp,
          .compute = block.compute,
          .seed = block.seed,
          .init_std = block.init_std / std::sqrt(2.0f * static_cast<float>(block.layers)),
          .out_groups = 1};
}

}  // namespace weft::nn
