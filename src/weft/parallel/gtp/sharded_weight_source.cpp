#include "weft/parallel/gtp/sharded_weight_source.h"

#include <numeric>

#include "weft/kernels/activation.h"
#include "weft/parallel/gtp/runtime.h"

namespace weft::parallel::gtp {

ShardedWeightSource::ShardedWeightSource(const Parameter& local,
                                         std::shared_ptr<comm::ProcessGroup> group,
                                         std::shared_ptr<Runtime> runtime, Precision precision,
                                         ExecContext exec)
    : weight_(local, *group,
              std::lcm(runtime->options.alignment, quantized_row_alignment(precision.recipe))),
      group_(std::move(group)),
      runtime_(std::move(runtime)),
      exec_(exec),
      gather_dtype_(precision.gemm_input()) {
  const Shape gathered = weight_.gathered_shape();
  forward_ = runtime_->cache.reserve(gathered, gather_dtype_, Use::forward);
  backward_ = runtime_->cache.reserve(gathered, gather_dtype_, Use::backward);
  gradient_ = runtime_->cache.reserve(gathered, DType::f32, Use::gradient);
}

ShardedWeightSource::~ShardedWeightSource() { runtime_->chain.forget(*this); }

WeightCache::Ticket ShardedWeightSource::ticket(Use use) const {
  switch (use) {
    case Use::forward: return quantizer_ ? quantized_forward_ : forward_;
    case Use::backward: return quantizer_ ? quantized_backward_ : backward_;
    case Use::gradient: return gradient_;
  }
  return gradient_;
}

Tensor ShardedWeightSource::weight_for_forward(PassContext& pass) {
  return runtime_->chain.materialize(*this, Use::forward, pass);
}

Tensor ShardedWeightSource::weight_for_backward(PassContext& pass) {
  return runtime_->chain.materialize(*this, Use::backward, pass);
}

Tensor ShardedWeightSource::quantized_weight(GemmQuantizer& quantizer, bool columnwise,
                                             PassContext& pass) {
  WEFT_CHECK(!quantizer_ || quantizer_ == &quantizer,
             "{}: a GTP weight quantized by two quantizers; each Linear keeps its own source",
             weight_.parameter().name);
  quantizer_ = &quantizer;
  return runtime_->chain.materialize(*this, columnwise ? Use::backward : Use::forward, pass);
}

comm::Work ShardedWeightSource::gather(Use use, const PassContext& pass) {
  if (quantizer_) return gather_quantized(use, pass);
  Tensor buffer = runtime_->cache.get(ticket(use));
  const Tensor& shard = weight_.parameter().value;
  if (buffer.dtype() == shard.dtype()) return group_->all_gather(buffer, shard);
  // Cast into this rank's place and gather in place.
  Tensor own = buffer.chunk(group_->size())[static_cast<size_t>(group_->rank())];
  own.copy_from(shard);
  return group_->all_gather(buffer, own);
}

comm::Work ShardedWeightSource::gather_quantized(Use use, const PassContext& pass) {
  const Parameter& p = weight_.parameter();
  QuantizedShard& shard = quantized_shard(use);
  shard.update(*quantizer_, *group_, p.value, p.version, reads_columnwise(use), pass);
  WeightCache::Ticket& t = use == Use::forward ? quantized_forward_ : quantized_backward_;
  const int64_t bytes = shard.packed().nbytes() * group_->size();
  if (t < 0) t = runtime_->cache.reserve({bytes}, DType::u8, use);
  Tensor buffer = runtime_->cache.get(t);
  WEFT_CHECK(buffer.nbytes() == bytes, "{}: the gathered quantized weight holds {} bytes, not {}",
             p.name, buffer.nbytes(), bytes);
  return group_->all_gather(buffer, shard.packed());
}

int64_t ShardedWeightSource::gather_bytes(Use use) const {
  if (quantizer_) return quantized_shard(use).bytes_moved();
  return dtype_storage_bytes(gather_dtype_, shard_elements());
}

Tensor ShardedWeightSource::gathered(Use use) {
  Tensor buffer = runtime_->cache.get(ticket(use));
  if (!quantizer_) return buffer.narrow(0, weight_.rows());
  Tensor out = quantizer_->weight_operand_buffer(use == Use::backward, weight_.gathered_shape());
  quantized_shard(use).dequantize(exec_, buffer, weight_.rows(), out);
  return out.narrow(0, weight_.rows());
}

void ShardedWeightSource::release(Use use) { runtime_->cache.release(ticket(use)); }

Tensor ShardedWeightSource::full_gradient() {
  if (runtime_->options.grad_accumulation == GradAccumulation::full) {
    if (!accumulated_.defined()) {
      accumulated_ = exec_.zeros(weight_.gathered_shape(), DType::f32, MemoryTag::grads);
    }
    return accumulated_;
  }
  // A reduction of this weight still in flight (a weight used twice in one
  // backward, with nothing in between) holds the buffer: finish it first.
  if (runtime_->cache.held(gradient_)) runtime_->chain.complete_reductions();
  Tensor buffer = runtime_->cache.get(gradient_);
  buffer.zero();
  return buffer;
}

Tensor ShardedWeightSource::weight_grad(PassContext&) {
  return full_gradient().narrow(0, weight_.rows());
}

void ShardedWeightSource::finalize_weight_grad(PassContext& pass, const Tensor& wgrad) {
  const bool full = runtime_->options.grad_accumulation == GradAccumulation::full;
  const bool ours =
      full ? accumulated_.same_storage(wgrad)
           : runtime_->cache.held(gradient_) && runtime_->cache.get(gradient_).same_storage(wgrad);
  WEFT_CHECK(ours, "{}: the weight gradient was not accumulated into the source's buffer",
             weight_.parameter().name);
  runtime_->chain.reduce(*this, pass);
}

bool ShardedWeightSource::reduce_scatter(const PassContext& pass, comm::Work& work) {
  const bool full = runtime_->options.grad_accumulation == GradAccumulation::full;
  if (full && !pass.final_microbatch()) return false;
  Tensor buffer = full ? accumulated_ : runtime_->cache.get(gradient_);
  Tensor own = buffer.chunk(group_->size())[static_cast<size_t>(group_->rank())];
  work = group_->reduce_scatter(own, buffer, comm::ReduceOp::avg);
  return true;
}

void ShardedWeightSource::add_reduced() {
  const bool full = runtime_->options.grad_accumulation == GradAccumulation::full;
  Tensor buffer = full ? accumulated_ : runtime_->cache.get(gradient_);
  const Tensor own = buffer.chunk(group_->size())[static_cast<size_t>(group_->rank())];
  kernels::axpy(exec_, 1.0f, own, weight_.parameter().grad);
  if (full) {
    buffer.zero();
  } else {
    runtime_->cache.release(gradient_);
  }
}

}  // namespace weft::parallel::gtp
