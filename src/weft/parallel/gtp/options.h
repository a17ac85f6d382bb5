// The options of generalized tensor parallelism (GTP) for one model: how
// weights are sharded over the gtp group, how many gathered weights the
// weight cache keeps alive, where microbatch gradients are summed and
// whether a MoE layer's experts are gathered together.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace weft::parallel::gtp {

// The name of the gtp group's dimension (ShardSpec::row_group, grids).
inline constexpr const char* kGroupName = "gtp";

// Where the weight gradients of a step's microbatches are summed.
//   shard  each microbatch's full gradient is reduce-scattered into the
//          shard's f32 gradient, which accumulates: a full-size gradient
//          lives only while its layer's backward and the reduce-scatter run
//          (the default: less memory; one reduce-scatter per weight per
//          microbatch)
//   full   a full-size f32 gradient per weight accumulates the microbatches
//          and is reduce-scattered once, in the last (one reduce-scatter per
//          weight per step, at the memory of an unsharded gradient)
enum class GradAccumulation : uint8_t { shard, full };
const char* grad_accumulation_name(GradAccumulation g);
// "shard" or "full"; anything else is a weft::Error naming the choices.
GradAccumulation parse_grad_accumulation(const std::string& s);

struct Options {
  // Every rank's rows are a multiple of this (16 for f32 and bf16; block
  // formats such as MXFP8 need their block size).
  int64_t alignment = 16;
  // Gathered weights alive at once: the one the GEMMs read and those
  // prefetched behind it (a batch of experts, below, counts as one). 2 (the
  // default): one layer computes while the next layer's all-gather runs; 1:
  // no prefetch.
  int cache_weights = 2;
  GradAccumulation grad_accumulation = GradAccumulation::shard;
  // A GroupedLinear's local experts gathered by one all-gather and reduced
  // by one reduce-scatter per pass and use (source_batch.h), holding all of
  // them gathered at once; false: each expert its own chain event (one
  // expert's weight at a time, E collectives).
  bool batch_experts = true;
  // Which weights are sharded, by the weight's name without ".weight"
  // ("h.3.mlp.fc1", "wte"); null: every weight a weight source gives out.
  std::function<bool(const std::string&)> shards{};
};

}  // namespace weft::parallel::gtp
