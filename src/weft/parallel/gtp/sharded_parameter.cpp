#include "weft/parallel/gtp/sharded_parameter.h"

#include "weft/parallel/gtp/options.h"

namespace weft::parallel::gtp {

ShardedParameter::ShardedParameter(const Parameter& local, const comm::ProcessGroup& group,
                                   int64_t alignment) {
  WEFT_CHECK(local.value.dim() >= 1 && local.value.size(0) == local.spec.tp_rows(),
             "{}: a weight of shape {} does not match its TP-level spec ({} rows)", local.name,
             local.value.shape(), local.spec.tp_rows());
  ShardSpec spec = row_split_spec(local.spec, kGroupName, group.rank(), group.size(), alignment);
  param_ = make_parameter(local.name, row_shard_of(spec, local.value), spec, local.decay);
  param_.grad_sum_group = local.grad_sum_group;
  gathered_shape_ = param_.value.shape();
  gathered_shape_[0] *= group.size();
}

Shape ShardedParameter::shape() const {
  Shape s = gathered_shape_;
  s[0] = rows();
  return s;
}

}  // namespace weft::parallel::gtp
