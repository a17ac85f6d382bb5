// SourceBatch: several ShardedWeightSources gathered and reduced as one
// member of the prefetch chain — a GroupedLinear's local experts under
// generalized tensor parallelism (gtp::Options::batch_experts).
//
// One all-gather (ProcessGroup::all_gather_coalesced) brings every source's
// weight into one weight-cache buffer, the sources' gathered buffers one
// after another (each as its own gather lays it out: the padded weight in the
// gather dtype, or its packed quantized shards), and one reduce-scatter
// (reduce_scatter_coalesced, avg) reduces every source's full-size gradient
// from one f32 buffer into its shard. Along the chain the batch is one event
// per use: the next member's gather is in flight while the batch's GEMMs run,
// and the batch's reduction overlaps the next member's backward. Each source
// keeps its own parameter, quantizer and quantized shards (quantized once
// per step and direction, as alone): the batch only moves their data and
// scales together.
//
// Memory: the cache counts a batch as one gathered weight, but it holds all
// its sources' gathered weights (and, in backward, their full-size f32
// gradients) at once — E experts' where a source at a time holds one; with
// the default prefetch depth two batches (E·2 experts' weights) can be alive.
// What it saves is E - 1 collectives per use and pass, the latency that
// dominates when experts are small. On the host backends (local, mpi) a
// coalesced collective packs its tensors into one temporary buffer and
// copies the result out (comm/process_group.h): during a batch's gather a
// transient second copy of its gathered weights, and a copy in and out.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "weft/parallel/gtp/prefetch_chain.h"
#include "weft/parallel/gtp/sharded_weight_source.h"
#include "weft/parallel/weight_source.h"

namespace weft::parallel::gtp {

struct Runtime;

class SourceBatch final : public WeightBatch, public ChainMember {
 public:
  // `sources` (at least one, over one gtp group; they outlive the batch) as
  // one member of `runtime`'s chain.
  SourceBatch(std::vector<ShardedWeightSource*> sources, std::shared_ptr<Runtime> runtime);
  ~SourceBatch() override;
  SourceBatch(const SourceBatch&) = delete;
  SourceBatch& operator=(const SourceBatch&) = delete;

  std::vector<Tensor> weights_for_forward(PassContext& pass) override;
  std::vector<Tensor> weights_for_backward(PassContext& pass) override;
  std::vector<Tensor> quantized_weights(std::span<GemmQuantizer* const> quantizers, bool columnwise,
                                        PassContext& pass) override;
  std::vector<Tensor> weight_grads(PassContext& pass) override;
  void finalize_weight_grads(PassContext& pass) override;

  // ---- the prefetch chain's side (prefetch_chain.h) ----
  comm::Work gather(Use use, const PassContext& pass) override;
  void release(Use use) override;
  int64_t gather_bytes(Use use) const override;
  int64_t shard_elements() const override;
  bool quantized() const override { return quantized_; }
  bool reduce_scatter(const PassContext& pass, comm::Work& work) override;
  void add_reduced() override;
  void each_parameter(const std::function<void(Parameter&)>& f) override;

 private:
  // A buffer holding every source's part, one after another along dim 0.
  struct Layout {
    WeightCache::Ticket ticket = -1;
    std::vector<int64_t> start, length;  // each source's rows (bytes, quantized)
  };
  std::vector<Tensor> materialize(Use use, PassContext& pass);
  static Tensor part(const Tensor& buffer, const Layout& layout, size_t i);
  // Source i's full-size f32 gradient buffer this pass.
  std::vector<Tensor> gradients();
  bool full_accumulation() const;

  std::vector<ShardedWeightSource*> sources_;
  std::shared_ptr<Runtime> runtime_;
  comm::ProcessGroup* group_ = nullptr;
  bool quantized_ = false;
  Layout gathered_[2];  // forward, backward: reserved at the first gather
  Layout gradient_;
};

}  // namespace weft::parallel::gtp
