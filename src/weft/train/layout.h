// A run's layout: the grid of its ranks (tp, cp, ep, gtp, dp, pp) and the groups its
// gradients are averaged over.
//
// Grid order "tp-cp-ep-gtp-dp-pp", the dimensions of size 1 left out but tp and
// dp ("tp-dp" without cp, ep and gtp, as before they existed). The ranks of
// cp, ep, gtp and dp see different data (the data dimensions: cp ranks
// different chunks of the same sequences); tp ranks see the same. Weights
// are replicated over cp, so their gradients average over cp x dp.
//
// Gradients: a parameter is averaged over the data dimensions it is
// replicated over (ShardSpec::replicated_over): a replicated weight over all
// of them, a GTP shard over ep and dp (its reduce-scatter averaged gtp), an
// expert's weight under expert parallelism over gtp and dp (it lives on one
// ep rank; nn/grouped_linear.h scales its gradient by 1/ep). One GradSync per
// such set of dimensions, each over the group spanning them; sharded (the
// distributed optimizer) each shards its buckets over that group.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "weft/comm/grid.h"
#include "weft/optim/grad_norm.h"
#include "weft/optim/grad_sync.h"
#include "weft/train/config.h"

namespace weft::train {

// Collective over `world`: the grid of `cfg` with `dp` data-parallel ranks.
std::unique_ptr<comm::Grid> make_grid(comm::ProcessGroup& world, const TrainConfig& cfg, int dp);

// The grid's data dimensions, in grid order ("cp", "ep", "gtp", "dp"; dp always).
std::vector<std::string> data_dims(const comm::GridLayout& layout);

// The group spanning `dims` (grid dimensions): the grid's own group for one
// dimension; for several, a new group, collective over `world`.
std::shared_ptr<comm::ProcessGroup> group_across(comm::ProcessGroup& world, const comm::Grid& grid,
                                                 const std::vector<std::string>& dims);

class GradSyncs {
 public:
  // Collective over `world` (it may create groups).
  // `data_group` spans every data dimension (it serves the parameters
  // replicated over all of them).
  GradSyncs(comm::ProcessGroup& world, const comm::Grid& grid,
            std::shared_ptr<comm::ProcessGroup> data_group,
            const std::vector<nn::Parameter*>& params, int64_t bucket_bytes, const ExecContext& ec,
            bool shard = false);

  void mark_ready(const nn::Parameter* p);
  void set_sync(bool on);
  void finish();
  // Each GradSync (one per set of data dimensions).
  std::vector<const optim::GradSync*> syncs() const;
  // `sums` observes every GradSync's buckets (the gradient norm bucket by bucket).
  void observe(optim::BucketNormSums& sums);

 private:
  std::vector<std::unique_ptr<optim::GradSync>> syncs_;
  std::unordered_map<const nn::Parameter*, optim::GradSync*> of_;
};

}  // namespace weft::train
