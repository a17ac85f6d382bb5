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
// pass. Under bf16 the shard is cast into its place in the gathered buffer
// and gathered in place: half the bytes of an f32 gather.
//
// Under a quantized recipe (FP8, MXFP8, NVFP4) a Linear asks for
// quantized_weight instead, and the shard travels in that format
// (quantized_gather.h): quantized once per step and direction (kept while
// the parameter's version and the quantizer's weight key are unchanged),
// gathered along the same prefetch chain into weight-cache buffers (the
// packed shards), and decoded into the quantizer's weight-operand buffer
// when the chain materializes it.
//
// A source is one member of the chain, or one of a SourceBatch's (a
// GroupedLinear's experts gathered together, source_batch.h): the batch
// runs the same steps — gather_buffer, gather_args, decode, reduce_args,
// add_reduced — on its own buffers, in one collective for all its sources.
#pragma once

#include <functional>
#include <memory>
#include <utility>

#include "weft/comm/process_group.h"
#include "weft/parallel/gtp/prefetch_chain.h"
#include "weft/parallel/gtp/quantized_gather.h"
#include "weft/parallel/gtp/sharded_parameter.h"
#include "weft/parallel/gtp/weight_cache.h"
#include "weft/parallel/weight_source.h"

namespace weft::parallel::gtp {

struct Runtime;

class ShardedWeightSource final : public WeightSource, public ChainMember {
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
  // Quantized recipes: the weight gathered in the quantized format along the
  // prefetch chain (forward: row-wise; backward: the column-wise copy where
  // it differs), decoded into `quantizer`'s weight-operand buffer. A source
  // serves one quantizer (its Linear's).
  Tensor quantized_weight(GemmQuantizer& quantizer, bool columnwise, PassContext& pass) override;
  // None: the gathered shards are decoded into the operand (quantized_weight).
  const QuantizedTensor* native_quantized_weight(GemmQuantizer&, bool, PassContext&) override {
    return nullptr;
  }
  // Whether the weight is gathered quantized (a Linear asked for
  // quantized_weight), and the times its shard was quantized, both
  // directions (tests: once per step).
  bool quantized() const override { return quantizer_ != nullptr; }
  // The quantizer its shard is quantized by (quantized_weight sets it; a
  // batch sets it before its first gather): one per source.
  void set_quantizer(GemmQuantizer& quantizer);
  int64_t quantizations() const { return rowwise_.quantizations() + columnwise_.quantizations(); }

  const ShardedParameter& sharded() const { return weight_; }
  comm::ProcessGroup& group() const { return *group_; }

  // ---- the prefetch chain's side (prefetch_chain.h) ----
  // Issues the all-gather of the shard into the buffer of `use` (forward or
  // backward) for `pass`; quantized, the shard quantized first unless current.
  comm::Work gather(Use use, const PassContext& pass) override;
  int64_t gather_bytes(Use use) const override;
  int64_t shard_elements() const override { return weight_.parameter().value.numel(); }
  // The gathered weight of `use` (after its all-gather completed).
  Tensor gathered(Use use);
  void release(Use use) override;
  // Issues the reduce-scatter of this pass's gradient in place, into this
  // rank's rows of the buffer.
  bool reduce_scatter(const PassContext& pass, comm::Work& work) override;
  void add_reduced() override;
  void each_parameter(const std::function<void(Parameter&)>& f) override { f(parameter()); }

  // ---- the steps of a gather and a reduction, on any buffer (a batch's) ----
  struct CollectiveArgs {
    Tensor out, in;
  };
  // Readies this rank's part of a gather of `use` (quantized: the shard
  // quantized unless current) and returns the gathered buffer's shape and
  // dtype: the padded weight in the gather dtype, or the packed quantized
  // shards' bytes.
  std::pair<Shape, DType> gather_buffer(Use use, const PassContext& pass);
  // The all-gather's out and in for a buffer of gather_buffer's shape (the
  // shard cast into this rank's place of it where the dtypes differ).
  CollectiveArgs gather_args(const Tensor& buffer, Use use);
  // The weight the GEMMs read, (rows, cols), from a gathered buffer.
  Tensor decode(const Tensor& buffer, Use use);
  // The full-size f32 gradient (padded: sharded().gathered_shape()) the
  // wgrad GEMM accumulates into under full-gradient accumulation: the
  // source's own, accumulating the step's microbatches.
  Tensor accumulated_gradient();
  // The reduce-scatter's out (this rank's rows) and in for a full-size f32
  // gradient buffer, and adding the reduced rows into the shard's gradient.
  CollectiveArgs reduce_args(const Tensor& buffer) const;
  void add_reduced(const Tensor& buffer);

 private:
  WeightCache::Ticket ticket(Use use) const;
  comm::Work gather_quantized(Use use, const PassContext& pass);
  // The backward reads the column-wise copy only where it differs (MXFP8).
  bool reads_columnwise(Use use) const {
    return use == Use::backward && quantizer_->weight_columnwise_differs();
  }
  QuantizedShard& quantized_shard(Use use) {
    return reads_columnwise(use) ? columnwise_ : rowwise_;
  }
  const QuantizedShard& quantized_shard(Use use) const {
    return reads_columnwise(use) ? columnwise_ : rowwise_;
  }
  // The full-size f32 gradient the wgrad GEMM accumulates into (padded).
  Tensor full_gradient();

  ShardedParameter weight_;
  std::shared_ptr<comm::ProcessGroup> group_;
  std::shared_ptr<Runtime> runtime_;
  ExecContext exec_;
  DType gather_dtype_;
  WeightCache::Ticket forward_ = 0, backward_ = 0, gradient_ = 0;
  // Full-gradient accumulation: the step's full gradient (tag grads).
  Tensor accumulated_;
  // Quantized recipes (set by the first quantized_weight): the Linear's
  // quantizer, the shard quantized for each use (the backward's copy is
  // the column-wise one where it differs) and the tickets of the packed
  // gathered buffers (reserved at the first gather, when their size is known).
  GemmQuantizer* quantizer_ = nullptr;
  QuantizedShard rowwise_, columnwise_;
  WeightCache::Ticket quantized_forward_ = -1, quantized_backward_ = -1;
};

}  // namespace weft::parallel::gtp
