// The global gradient norm over every sharding of the model, each parameter
// element counted once.
//
// A parameter split over a group contributes its local slice (without row
// padding) on every rank of that group; a parameter replicated over a group
// contributes only on the group's rank 0. The partial sums are then summed over every group given,
// so each element of the global model is counted exactly once, whatever the TP / GTP / DP layout.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "weft/comm/process_group.h"
#include "weft/core/exec_context.h"
#include "weft/nn/parameter.h"
#include "weft/optim/grad_sync.h"

namespace weft::optim {

using Groups = std::map<std::string, std::shared_ptr<comm::ProcessGroup>>;

// groups: the layout's groups by name ("tp", "dp", ...); a name a spec refers
// to but missing here counts as a group of one.
// The local sums of squares run on `ec`.
double global_grad_norm(const std::vector<nn::Parameter*>& params, const Groups& groups,
                        const ExecContext& ec = ExecContext::host());

// The square of that norm computed where the gradients are, into
// `sum_of_squares` (f64, one element, on ec's device): the local sums and the
// group all-reduces run on the device and nothing returns to the host
// (kernels::clip_scale takes its root; a training step reads it with the
// loss). Its root is bit for bit what global_grad_norm returns.
void global_grad_norm_sum(const std::vector<nn::Parameter*>& params, const Groups& groups,
                          const ExecContext& ec, Tensor& sum_of_squares);

// The same square under the distributed optimizer: each rank counts the
// stretches of its buckets' shards (reduce-scattered over the data groups,
// so the data dimensions `data_dims` count each element once by
// construction), with the other groups' rules as above; the partial sums
// are then summed over every group of `groups`.
void sharded_grad_norm_sum(const std::vector<const BucketShard*>& buckets, const Groups& groups,
                           const std::vector<std::string>& data_dims, const ExecContext& ec,
                           Tensor& sum_of_squares);

// The same square summed bucket by bucket as the GradSyncs reduce the
// buckets (a BucketObserver; the CPU's: the sums run on the host's threads):
// each bucket's counted gradients -- whole, or under the distributed
// optimizer the shard's stretches -- as soon as it is reduced, while the
// backward goes on, and the parameters whose gradients change in finish()
// (GradSync::summed_after) at its end. The total adds the buckets in a fixed
// order: a configuration gives the same bits every run (not those of
// global_grad_norm_sum, which adds in parameter order).
class BucketNormSums final : public BucketObserver {
 public:
  // `groups` as above; `data_dims`: the dimensions the syncs shard over
  // (the distributed optimizer's data dimensions; empty when not sharded).
  BucketNormSums(Groups groups, std::vector<std::string> data_dims, const ExecContext& ec);
  // Observes `sync` (sets its observer); the same order on every rank.
  void observe(GradSync& sync);
  void bucket_final(const GradSync& sync, int64_t index) override;
  void partials_final(const GradSync& sync) override;
  // The step's square, summed over every group, into `sum_of_squares` (f64,
  // one element, on the host); the sums start again for the next step.
  void total(Tensor& sum_of_squares);

 private:
  size_t index_of(const GradSync& sync) const;
  double sum(const std::vector<Tensor>& counted) const;

  Groups groups_;
  std::vector<std::string> data_dims_;
  ExecContext ec_;
  std::vector<const GradSync*> syncs_;
  std::vector<std::vector<double>> bucket_sums_;  // per sync, per bucket
  std::vector<double> partial_sums_;              // per sync
};

// max_norm / norm when the norm exceeds max_norm, else 1 (0 disables clipping).
float clip_scale(double norm, double max_norm);

}  // namespace weft::optim
