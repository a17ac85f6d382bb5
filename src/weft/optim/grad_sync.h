// Data-parallel gradient synchronization: gradients averaged over the DP
// group in buckets, each bucket's all-reduce issued asynchronously as soon as
// all of its gradients are final, so communication overlaps the rest of the
// backward pass.
//
// At construction every parameter's gradient is moved into a flat bucket
// buffer (Parameter::grad becomes a view of it), so a bucket is reduced in
// place with one collective and no copies. Buckets are filled in reverse
// parameter order, the order in which backward finishes them.
//
// With gradient accumulation, only the last microbatch synchronizes: call
// set_sync(false) for the others and mark_ready() does nothing.
//
// After the DP reduction, gradients that are partial sums over another group
// (Parameter::grad_sum_group: replicated parameters under sequence
// parallelism) are summed over that group in finish(), one coalesced
// all-reduce per group; buckets still pending at finish() go as one
// coalesced all-reduce too. Last, the common rows of shared slices (key/value
// heads replicated over TP ranks, ShardSpec::shared) are summed over their
// share groups (sum_shared_gradients).
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "weft/comm/process_group.h"
#include "weft/core/exec_context.h"
#include "weft/nn/parameter.h"

namespace weft::optim {

// Sums the gradients of the shared slices' common rows (ShardSpec::shared:
// each sharing rank computed its own part) over Parameter::share_group, one
// coalesced all-reduce per group; the other parameters are left alone.
// Collective over every share group among `params`.
void sum_shared_gradients(const std::vector<nn::Parameter*>& params);

// Sharded (the distributed optimizer, optim/distributed_optimizer.h): each
// bucket is padded to a multiple of the group's size D and reduce-scattered
// (averaged) instead of all-reduced, so that each rank ends the step with
// its 1/D of the bucket's averaged gradient (BucketShard::shard); the
// grad_sum_group and share-group sums then run on the parameters' stretches
// within that shard (the ranks of those groups hold the same shard range:
// they share the data rank, and the buckets have the same layout on every
// rank of the model replica).
struct BucketShard {
  // A parameter's stretch of the bucket: elements [param_offset, +length)
  // of the flattened parameter at [bucket_offset, +length) of `flat`.
  struct Piece {
    nn::Parameter* param = nullptr;
    int64_t param_offset = 0, bucket_offset = 0, length = 0;
  };
  comm::ProcessGroup* group = nullptr;  // null: a group of one
  Tensor flat;                          // the whole bucket (padded): the gradients, views of it
  Tensor shard;  // this rank's averaged gradient: flat's [shard_begin, +shard.numel())
  int64_t shard_begin = 0;
  std::vector<Piece> pieces;  // every parameter of the bucket, in bucket order
  // The pieces of `pieces` clipped to this rank's shard.
  std::vector<Piece> own() const;
};

class GradSync;

// Told of each bucket as its gradients become final (the gradient norm's
// sums bucket by bucket, optim/grad_norm.h BucketNormSums).
class BucketObserver {
 public:
  virtual ~BucketObserver() = default;
  // Bucket `index` of `sync` is reduced (its parameters' gradients, or
  // sharded its shard, final but for summed_after parameters).
  virtual void bucket_final(const GradSync& sync, int64_t index) = 0;
  // finish() has summed the partial gradients (summed_after parameters).
  virtual void partials_final(const GradSync& sync) = 0;
};

class GradSync {
 public:
  // dp may be null or of size 1: then only the grad_sum_group sums run.
  // The buckets are allocated on `ec`. `shard`: reduce-scatter (above).
  GradSync(std::vector<nn::Parameter*> params, std::shared_ptr<comm::ProcessGroup> dp,
           int64_t bucket_bytes = 25 << 20, const ExecContext& ec = ExecContext::host(),
           bool shard = false);

  void set_sync(bool on) { sync_ = on; }
  bool sync() const { return sync_; }

  // Declares p's gradient final for this step; issues its bucket's
  // all-reduce when the bucket is complete.
  void mark_ready(const nn::Parameter* p);
  // Issues what is still pending, waits for every bucket, then sums the
  // partial gradients over their groups. Call once per step after backward.
  void finish();

  int64_t num_buckets() const { return static_cast<int64_t>(buckets_.size()); }
  bool sharded() const { return shard_; }
  // Sharded: bucket i's layout and this rank's shard (buckets in reverse
  // parameter order, the order backward completes them).
  const BucketShard& bucket_shard(int64_t i) const { return buckets_[static_cast<size_t>(i)].bs; }
  // Buckets issued before finish() in the last step (overlapped with backward).
  int64_t issued_early() const { return last_issued_early_; }
  // Bucket i's parameters, and all of them.
  const std::vector<const nn::Parameter*>& bucket_parameters(int64_t i) const {
    return buckets_[static_cast<size_t>(i)].params;
  }
  const std::vector<nn::Parameter*>& parameters() const { return params_; }
  // Whether p's gradient changes in finish() after its bucket's reduction
  // (a partial sum over grad_sum_group, or shared rows over share_group).
  static bool summed_after(const nn::Parameter& p);
  // Told of each bucket of the synchronizing step as it is reduced: at once
  // without a group, else when its collective is seen completed (at a later
  // mark_ready, or in finish()); null: none.
  void set_observer(BucketObserver* observer) { observer_ = observer; }

 private:
  struct Bucket {
    Tensor flat;
    BucketShard bs;  // sharded: the layout and shard (bs.flat is flat)
    std::vector<const nn::Parameter*> params;
    int64_t ready = 0;
    bool issued = false;
    bool observed = false;  // the observer was told in this step
    comm::Work work;
  };
  // Tells the observer of each issued bucket whose reduction is complete
  // (all of them: waits first).
  void observe_completed(bool wait);
  void issue(Bucket& b);
  // Sums the partial gradients over their groups (grad_sum_group, then the
  // shared slices' share groups): whole gradients, or the shards' stretches.
  void sum_partial_gradients();

  std::vector<nn::Parameter*> params_;
  std::shared_ptr<comm::ProcessGroup> dp_;
  std::vector<Bucket> buckets_;
  std::unordered_map<const nn::Parameter*, size_t> bucket_of_;
  std::unordered_map<const nn::Parameter*, bool> ready_;  // marked in this step
  bool sync_ = true;
  bool shard_ = false;
  BucketObserver* observer_ = nullptr;
  int64_t issued_early_ = 0;
  int64_t last_issued_early_ = 0;
};

}  // namespace weft::optim
