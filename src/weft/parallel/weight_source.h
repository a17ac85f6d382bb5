// WeightSource: how a Linear gets the weight its GEMMs read and where the
// weight gradient goes. nn/ sees only this interface, so generalized tensor
// parallelism (a source that all-gathers a 1/N shard just in time, along a
// prefetch chain, and reduce-scatters the gradient) and low-precision
// recipes (a source that hands out a quantized weight and its scales) plug in
// here without changing nn/.
//
// A pass calls, in order:
//   weight_for_forward(pass)            the forward GEMM's weight
//   weight_for_backward(pass)           the dgrad GEMM's weight (same pass)
//   weight_grad(pass)                   the f32 buffer the wgrad GEMM accumulates into
//   finalize_weight_grad(pass, wgrad)   wgrad (that buffer) holds this pass's gradient
// (a user whose backward needs no weight, the embedding's lookup, skips
// weight_for_backward; a weight used twice in a pass, wte, is called twice).
// Both weights are (rows, cols) = shape() in the precision recipe's GEMM input
// dtype; a GEMM reads them transposed (y = x·Wᵀ). They stay valid while the
// module that asked for them runs: a source may reuse their memory for the
// next weight another module asks for (generalized tensor parallelism's
// sources do; the plain source's stay valid until the pass's backward is done).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "weft/core/exec_context.h"
#include "weft/core/quantized.h"
#include "weft/kernels/gemm.h"
#include "weft/parallel/parameter.h"
#include "weft/parallel/pass.h"
#include "weft/parallel/precision.h"

namespace weft::parallel {

class GemmQuantizer;

class WeightSource {
 public:
  virtual ~WeightSource() = default;

  // The shape of the weight the GEMMs read: this rank's (out, in).
  virtual Shape shape() const = 0;
  virtual Tensor weight_for_forward(PassContext& pass) = 0;
  virtual Tensor weight_for_backward(PassContext& pass) = 0;
  virtual Tensor weight_grad(PassContext& pass) = 0;
  virtual void finalize_weight_grad(PassContext& pass, const Tensor& wgrad) = 0;
  // The parameter behind the weight (what the optimizer and checkpoints see).
  virtual Parameter& parameter() = 0;
  // Under a quantized recipe, in place of weight_for_forward (columnwise
  // false) or weight_for_backward (true): the weight quantized by
  // `quantizer` as the GEMM operand (GemmQuantizer::operand). By default the
  // weight asked for, quantized; generalized tensor parallelism's source
  // quantizes its shard and gathers it in the quantized format.
  virtual Tensor quantized_weight(GemmQuantizer& quantizer, bool columnwise, PassContext& pass);
  // Under a quantized recipe whose GEMMs are native
  // (GemmQuantizer::native_gemm): the weight quantized by `quantizer` as the
  // GEMM reads it (GemmQuantizer::native: columnwise, the transposed copy the
  // dgrad GEMM multiplies), valid until the quantizer's next weight of that
  // direction; or null where the source has none to hand out (generalized
  // tensor parallelism's gathered shards), and the caller multiplies
  // quantized_weight() instead. By default the weight asked for, quantized.
  virtual const QuantizedTensor* native_quantized_weight(GemmQuantizer& quantizer, bool columnwise,
                                                         PassContext& pass);
  // In place of weight_for_forward (backward false: op(b) = Wᵀ) or
  // weight_for_backward (true: op(b) = W): the same weight as a packed GEMM
  // operand (kernels::PackedWeight), for users whose products are many and
  // small; or null where the source keeps none (by default; generalized
  // tensor parallelism's gathered shards), and the caller multiplies the
  // weight itself. Valid until the source's next weight of that direction.
  virtual const kernels::PackedWeight* packed_weight(bool backward, PassContext& pass);
};

// WeightBatch: the weights of several sources of one shape that a module
// reads together (a GroupedLinear's local experts), fetched as one: under
// generalized tensor parallelism one all-gather brings all of them and one
// reduce-scatter reduces all their gradients (gtp::SourceBatch), at the cost
// of holding every one of them gathered at once. A pass calls, in order:
//   weights_for_forward(pass)            (or quantized_weights(.., false, ..))
//   weights_for_backward(pass)           (or quantized_weights(.., true, ..))
//   weight_grads(pass)                   f32 buffers the wgrad GEMMs accumulate into
//   finalize_weight_grads(pass)          they hold this pass's gradients
// Each vector holds one tensor per source, in the sources' order, valid as a
// WeightSource's weights are (until the next weight is asked for).
class WeightBatch {
 public:
  virtual ~WeightBatch() = default;
  virtual std::vector<Tensor> weights_for_forward(PassContext& pass) = 0;
  virtual std::vector<Tensor> weights_for_backward(PassContext& pass) = 0;
  // Under a quantized recipe: source i's weight quantized by quantizers[i]
  // as the GEMM operand (WeightSource::quantized_weight for all of them).
  virtual std::vector<Tensor> quantized_weights(std::span<GemmQuantizer* const> quantizers,
                                                bool columnwise, PassContext& pass) = 0;
  virtual std::vector<Tensor> weight_grads(PassContext& pass) = 0;
  virtual void finalize_weight_grads(PassContext& pass) = 0;
};

// The plain source: this rank's shard of a parameter (all of it without TP),
// cast to the GEMM input dtype (on the context's threads). The cast lives in
// a buffer of the source, reused across steps; it is made at most once per
// pass, and once per optimizer step when the pass allows reuse
// (PassContext::reuse_weight_casts) and the parameter's version is unchanged.
// Under f32 the parameter's value itself is handed out. The gradient
// accumulates directly into the parameter's grad; finalize has nothing left
// to do.
//
// packed_weight: the cast weight as a packed GEMM operand
// (kernels::PackedWeight), for users whose products are many and small (a
// GroupedLinear's experts): packed from each new cast, once per direction,
// and kept with it — two more copies of the weight (forward and backward
// layouts) in weight_cache memory, made only where the CPU packs bf16.
class LocalShardSource final : public WeightSource {
 public:
  LocalShardSource(Parameter& parameter, Precision precision, ExecContext exec);

  Shape shape() const override { return parameter_.value.shape(); }
  Tensor weight_for_forward(PassContext& pass) override;
  Tensor weight_for_backward(PassContext& pass) override;
  Tensor weight_grad(PassContext& pass) override;
  void finalize_weight_grad(PassContext& pass, const Tensor& wgrad) override;
  Parameter& parameter() override { return parameter_; }

  // Casts made so far (tests check that one step casts once).
  int64_t casts() const { return casts_; }

  // In place of weight_for_forward (backward false: op(b) = Wᵀ, y = x·Wᵀ) or
  // weight_for_backward (true: op(b) = W, dx = dy·W): the same weight packed.
  const kernels::PackedWeight* packed_weight(bool backward, PassContext& pass) override;

 private:
  Tensor cast(bool allow_reuse);

  Parameter& parameter_;
  Precision precision_;
  ExecContext exec_;
  Tensor cast_;
  bool cast_valid_ = false;
  uint64_t cast_version_ = 0;
  int64_t casts_ = 0;
  // The packed weights (forward, backward) and the cast each was packed from.
  kernels::PackedWeight packed_[2];
  int64_t packed_from_[2] = {-1, -1};
};

}  // namespace weft::parallel
