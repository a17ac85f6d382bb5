// ShardedWeightSource: the weight source of generalized tensor parallelism.
// A Linear (or the embedding) reads a whole TP-level weight; this source
// holds 1/N of it (ShardedParameter) and gathers the rest just in time.
//
//   weight_for_forward / _backward   the all-gathered weight, (rows, cols) in
//                                    the GEMM input dtype, from the prefetch
//                                    chain: its all-gather was issued while
//                                    the previous layer computed
//   weight_grad                      a zeroed full-size f32 gradient buffer
//                                    from the weight cache (or, accumulating
//                                    full gradients, the weight's own)
//   finalize_weight_grad             the buffer is reduce-scattered (avg over
//                                    the group) into the shard's f32
//                                    gradient asynchronously; the next
//                                    layer's backward, or the end of
//                                    backward, waits for it and adds it in
// The weights stay valid until the next weight of the chain is materialized
// (the GEMMs that read them are done by then), not until the end of the
// pass. Under a quantized recipe (FP8, MXFP8, NVFP4) the shard is quantized
// and gathered in that format instead (quantized_weight, quantized_gather.h).
// Under bf16 the shard is cast into its place in the gathered buffer
// and gathered in place: half the bytes of an f32 gather.
#pragma once

#include <memory>

#include "weft/comm/process_group.h"
#include "weft/parallel/gtp/sharded_parameter.h"
#include "weft/parallel/gtp/weight_cache.h"
#include "weft/parallel/weight_source.h"

namespace weft::parallel::gtp {

struct Runtime;

class ShardedWeightSource final : public WeightSource {
 public:
  // Takes this rank's shard of `local` (the TP-level weight) over `group`
  // (more than one rank); `runtime` is the model's (its chain and cache).
  ShardedWeightSource(const Parameter& local, std::shared_ptr<comm::ProcessGroup> group,
                      std::shared_ptr<Runtime> runtime, Precision precision, ExecContext exec);
  ~ShardedWeightSource() override;
  ShardedWeightSource(const ShardedWeightSource&) = delete;
  ShardedWeightSource& operator=(const ShardedWeightSource&) = delete;

  Shape shape() const override { return weight_.shape(); }
  Tensor weight_for_forward(PassContext& pass) override;
  Tensor weight_for_backward(PassContext& pass) override;
  Tensor weight_grad(PassContext& pass) override;
  void finalize_weight_grad(PassContext& pass, const Tensor& wgrad) override;
  Parameter& parameter() override { return weight_.parameter(); }
  // Quantized recipes: the shard quantized and gathered in the quantized
  // format (quantized_gather.h), outside the prefetch chain (synchronous).
  Tensor quantized_weight(GemmQuantizer& quantizer, bool columnwise, PassContext& pass) override;
  // Bytes and elements this rank sent in quantized gathers so far.
  int64_t quantized_bytes_sent() const { return quantized_bytes_; }
  int64_t quantized_elements_sent() const { return quantized_elements_; }

  const ShardedParameter& sharded() const { return weight_; }
  comm::ProcessGroup& group() const { return *group_; }

  // ---- the prefetch chain's side (prefetch_chain.h) ----
  // Issues the all-gather of the shard into the buffer of `use` (forward or
  // backward).
  comm::Work gather(Use use);
  // The gathered weight of `use` (after its all-gather completed).
  Tensor gathered(Use use);
  void release(Use use);
  // Issues the reduce-scatter of this pass's gradient in place, into this
  // rank's rows of the buffer; false when there is nothing to reduce in this
  // pass (full-gradient accumulation before the last microbatch).
  bool reduce_scatter(const PassContext& pass, comm::Work& work);
  // After the reduce-scatter: adds this rank's reduced rows into the
  // shard's gradient and frees the buffer for the next pass.
  void add_reduced();

 private:
  WeightCache::Ticket ticket(Use use) const;
  // The full-size f32 gradient the wgrad GEMM accumulates into (padded).
  Tensor full_gradient();

  ShardedParameter weight_;
  std::shared_ptr<comm::ProcessGroup> group_;
  std::shared_ptr<Runtime> runtime_;
  ExecContext exec_;
  WeightCache::Ticket forward_ = 0, backward_ = 0, gradient_ = 0;
  // Full-gradient accumulation: the step's full gradient (tag grads).
  Tensor accumulated_;
  int64_t quantized_bytes_ = 0, quantized_elements_ = 0;
};

}  // namespace weft::parallel::gtp
