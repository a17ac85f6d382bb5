#include "weft/parallel/weight_source.h"

#include "weft/kernels/activation.h"
#include "weft/parallel/gemm_quantizer.h"

namespace weft::parallel {

Tensor WeightSource::quantized_weight(GemmQuantizer& quantizer, bool columnwise,
                                      PassContext& pass) {
  const Tensor w = columnwise ? weight_for_backward(pass) : weight_for_forward(pass);
  return quantizer.operand(GemmQuantizer::Operand::weight, w, columnwise, pass);
}

const QuantizedTensor* WeightSource::native_quantized_weight(GemmQuantizer& quantizer,
                                                             bool columnwise, PassContext& pass) {
  const Tensor w = columnwise ? weight_for_backward(pass) : weight_for_forward(pass);
  return &quantizer.native(GemmQuantizer::Operand::weight, w, columnwise, pass);
}

LocalShardSource::LocalShardSource(Parameter& parameter, Precision precision, ExecContext exec)
    : parameter_(parameter), precision_(precision), exec_(exec) {}

Tensor LocalShardSource::cast(bool allow_reuse) {
  const DType dt = precision_.gemm_input();
  if (parameter_.value.dtype() == dt) return parameter_.value;
  if (allow_reuse && cast_valid_ && cast_version_ == parameter_.version &&
      cast_.shape() == parameter_.value.shape()) {
    return cast_;
  }
  if (!cast_.defined() || !(cast_.shape() == parameter_.value.shape()) || cast_.dtype() != dt) {
    cast_ = exec_.empty(parameter_.value.shape(), dt, MemoryTag::weight_cache);
  }
  kernels::convert(exec_, parameter_.value, cast_);
  cast_valid_ = true;
  cast_version_ = parameter_.version;
  ++casts_;
  return cast_;
}

Tensor LocalShardSource::weight_for_forward(PassContext& pass) {
  return cast(pass.reuse_weight_casts());
}

Tensor LocalShardSource::weight_for_backward(PassContext&) {
  // The forward of this pass made (or reused) the cast, and weights do not
  // change between a pass's forward and backward.
  return cast(true);
}

const kernels::PackedWeight* WeightSource::packed_weight(bool, PassContext&) { return nullptr; }

const kernels::PackedWeight* LocalShardSource::packed_weight(bool backward, PassContext& pass) {
  const Tensor w = backward ? weight_for_backward(pass) : weight_for_forward(pass);
  const auto d = static_cast<size_t>(backward);
  // Without a cast the weight is the parameter's value, which may change
  // at any time: its products read it plain.
  const bool cast = parameter_.value.dtype() != precision_.gemm_input();
  if (!cast || packed_from_[d] != casts_ || !packed_[d].plain().same_storage(w)) {
    kernels::pack_b(exec_, w, !backward, packed_[d]);
    packed_from_[d] = cast ? casts_ : -1;
  }
  return &packed_[d];
}

Tensor LocalShardSource::weight_grad(PassContext&) { return parameter_.grad; }

void LocalShardSource::finalize_weight_grad(PassContext&, const Tensor& wgrad) {
  WEFT_CHECK(wgrad.same_storage(parameter_.grad),
             "{}: the weight gradient was not accumulated into the source's buffer",
             parameter_.name);
}

}  // namespace weft::parallel
