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
  runtime_->chain.materialize(*this, Use::forward, pass);
  return gathered(Use::forward);
}

Tensor ShardedWeightSource::weight_for_backward(PassContext& pass) {
  runtime_->chain.materialize(*this, Use::backward, pass);
  return gathered(Use::backward);
}

void ShardedWeightSource::set_quantizer(GemmQuantizer& quantizer) {
  WEFT_CHECK(!quantizer_ || quantizer_ == &quantizer,
             "{}: a GTP weight quantized by two quantizers; each Linear keeps its own source",
             weight_.parameter().name);
  quantizer_ = &quantizer;
}

Tensor ShardedWeightSource::quantized_weight(GemmQuantizer& quantizer, bool columnwise,
                                             PassContext& pass) {
  set_quantizer(quantizer);
  const Use use = columnwise ? Use::backward : Use::forward;
  runtime_->chain.materialize(*this, use, pass);
  return gathered(use);
}

std::pair<Shape, DType> ShardedWeightSource::gather_buffer(Use use, const PassContext& pass) {
  if (!quantizer_) return {weight_.gathered_shape(), gather_dtype_};
  const Parameter& p = weight_.parameter();
  QuantizedShard& shard = quantized_shard(use);
  shard.update(*quantizer_, *group_, p.value, p.version, reads_columnwise(use), pass);
  return {Shape{shard.packed().nbytes() * group_->size()}, DType::u8};
}

ShardedWeightSource::CollectiveArgs ShardedWeightSource::gather_args(const Tensor& buffer,
                                                                     Use use) {
  if (quantizer_) {
    const Tensor& packed = quantized_shard(use).packed();
    WEFT_CHECK(buffer.nbytes() == packed.nbytes() * group_->size(),
               "{}: the gathered quantized weight holds {} bytes, not {}", weight_.parameter().name,
               buffer.nbytes(), packed.nbytes() * group_->size());
    return {buffer, packed};
  }
  const Tensor& shard = weight_.parameter().value;
  if (buffer.dtype() == shard.dtype()) return {buffer, shard};
  // Cast into this rank's place and gather in place.
  Tensor own = buffer.chunk(group_->size())[static_cast<size_t>(group_->rank())];
  kernels::convert(exec_, shard, own);
  return {buffer, own};
}

comm::Work ShardedWeightSource::gather(Use use, const PassContext& pass) {
  const auto [shape, dtype] = gather_buffer(use, pass);
  if (quantizer_) {
    WeightCache::Ticket& t = use == Use::forward ? quantized_forward_ : quantized_backward_;
    if (t < 0) t = runtime_->cache.reserve(shape, dtype, use);
  }
  const CollectiveArgs a = gather_args(runtime_->cache.get(ticket(use)), use);
  return group_->all_gather(a.out, a.in);
}

int64_t ShardedWeightSource::gather_bytes(Use use) const {
  if (quantizer_) return quantized_shard(use).bytes_moved();
  return dtype_storage_bytes(gather_dtype_, shard_elements());
}

Tensor ShardedWeightSource::decode(const Tensor& buffer, Use use) {
  if (!quantizer_) return buffer.narrow(0, weight_.rows());
  Tensor out = quantizer_->weight_operand_buffer(use == Use::backward, weight_.gathered_shape());
  quantized_shard(use).dequantize(exec_, buffer, weight_.rows(), out);
  return out.narrow(0, weight_.rows());
}

Tensor ShardedWeightSource::gathered(Use use) {
  return decode(runtime_->cache.get(ticket(use)), use);
}

void ShardedWeightSource::release(Use use) { runtime_->cache.release(ticket(use)); }

Tensor ShardedWeightSource::accumulated_gradient() {
  if (!accumulated_.defined()) {
    accumulated_ = exec_.zeros(weight_.gathered_shape(), DType::f32, MemoryTag::grads);
  }
  return accumulated_;
}

Tensor ShardedWeightSource::full_gradient() {
  if (runtime_->options.grad_accumulation == GradAccumulation::full) return accumulated_gradient();
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

ShardedWeightSource::CollectiveArgs ShardedWeightSource::reduce_args(const Tensor& buffer) const {
  Tensor own = buffer.chunk(group_->size())[static_cast<size_t>(group_->rank())];
  return {own, buffer};
}

void ShardedWeightSource::add_reduced(const Tensor& buffer) {
  kernels::axpy(exec_, 1.0f, reduce_args(buffer).out, weight_.parameter().grad);
}

bool ShardedWeightSource::reduce_scatter(const PassContext& pass, comm::Work& work) {
  const bool full = runtime_->options.grad_accumulation == GradAccumulation::full;
  if (full && !pass.final_microbatch()) return false;
  const CollectiveArgs a = reduce_args(full ? accumulated_ : runtime_->cache.get(gradient_));
  work = group_->reduce_scatter(a.out, a.in, comm::ReduceOp::avg);
  return true;
}

void ShardedWeightSource::add_reduced() {
  const bool full = runtime_->options.grad_accumulation == GradAccumulation::full;
  Tensor buffer = full ? accumulated_ : runtime_->cache.get(gradient_);
  add_reduced(buffer);
  if (full) {
    buffer.zero();
  } else {
    runtime_->cache.release(gradient_);
  }
}

}  // namespace weft::parallel::gtp
