// DistributedOptimizer: AdamW with its moments sharded over the data-parallel
// ranks (ZeRO stage 1, Megatron's distributed optimizer).
//
// It works on the sharded GradSyncs' buckets (grad_sync.h): each bucket's
// gradient was reduce-scattered (averaged) over the bucket's group as the
// backward completed it, so each rank holds the averaged gradient of its
// 1/D of the bucket. Each rank keeps the two moments of that shard only
// (MemoryTag::optimizer: 2·N/D floats instead of 2·N) and updates the
// parameters' elements in it, in place in the parameters' f32 values with
// the kernel AdamW runs (each element bit for bit as AdamW updates it).
// Then each bucket's updated shard is all-gathered in place into the bucket
// buffer and copied into the other ranks' stretches of the parameters.
//
// Order: the buckets are visited in the forward's order (the last bucket
// holds the first layers); a bucket's all-gather is issued as soon as its
// update is done, so it runs while the next buckets update; the gathers are
// completed (and copied out) at the end of the step, before the next
// forward reads any weight. The master weights are the parameters' f32
// values, which the forward reads through the weight sources: they stay
// whole on every rank (a compute copy in bf16 would let them shard too).
//
// Checkpoints keep AdamW's layout (a moment per parameter, per ShardSpec):
// gathered() assembles a whole AdamW from the shards (collective) for
// io::save_checkpoint, and load() takes one back that io::load_checkpoint
// filled, so a sharded run's checkpoint loads at any dp with or without the
// distributed optimizer, and the other way round.
#pragma once

#include <memory>
#include <vector>

#include "weft/optim/adamw.h"
#include "weft/optim/grad_sync.h"

namespace weft::optim {

class DistributedOptimizer {
 public:
  // `syncs`: sharded GradSyncs covering every parameter of `params` once.
  DistributedOptimizer(std::vector<nn::Parameter*> params, std::vector<const GradSync*> syncs,
                       AdamWOptions options, const ExecContext& ec = ExecContext::host());

  // One update at `lr` with the gradient scale read from `grad_scale` (f32,
  // one element, on ec's device; NaN: no update), then the weights gathered
  // (collective over every bucket's group). Advances the step counter.
  void step(float lr, const Tensor& grad_scale);

  int64_t steps_taken() const { return step_; }
  void set_steps_taken(int64_t s) { step_ = s; }
  // Every bucket this rank updates a shard of.
  std::vector<const BucketShard*> buckets() const;
  // Bytes of the moment shards this rank holds.
  int64_t state_bytes() const;

  // A whole AdamW over the parameters holding the gathered moments and the
  // step count (collective over the buckets' groups).
  std::unique_ptr<AdamW> gathered() const;
  // The moments and step count of `whole` (an AdamW over the same
  // parameters), this rank's shards of them.
  void load(AdamW& whole);

 private:
  struct Shard {
    const BucketShard* bucket = nullptr;
    std::vector<BucketShard::Piece> own;  // the pieces in this rank's shard
    Tensor m, v;                          // the shard's moments
  };
  int64_t index_of(const nn::Parameter* p) const;

  std::vector<nn::Parameter*> params_;
  AdamWOptions options_;
  ExecContext ec_;
  std::vector<Shard> shards_;  // in the forward's order
  int64_t step_ = 0;
};

}  // namespace weft::optim
