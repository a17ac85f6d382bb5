#include "weft/parallel/gtp/source_batch.h"

#include "weft/parallel/gtp/runtime.h"

namespace weft::parallel::gtp {

namespace {

// The buffer holding `shapes` one after another along dim 0 (their other
// dimensions equal), and where each starts.
Shape concatenated(const std::vector<Shape>& shapes, std::vector<int64_t>& start,
                   std::vector<int64_t>& length, const char* what) {
  Shape total = shapes.front();
  int64_t rows = 0;
  start.clear();
  length.clear();
  for (const Shape& s : shapes) {
    WEFT_CHECK(s.rank() == total.rank(), "a GTP batch's {} buffers differ in rank: {} and {}", what,
               total, s);
    for (int d = 1; d < s.rank(); ++d) {
      WEFT_CHECK(s[d] == total[d], "a GTP batch's {} buffers differ: {} and {}", what, total, s);
    }
    start.push_back(rows);
    length.push_back(s[0]);
    rows += s[0];
  }
  total[0] = rows;
  return total;
}

size_t index_of(Use use) { return use == Use::forward ? 0 : 1; }

}  // namespace

SourceBatch::SourceBatch(std::vector<ShardedWeightSource*> sources,
                         std::shared_ptr<Runtime> runtime)
    : sources_(std::move(sources)), runtime_(std::move(runtime)) {
  WEFT_CHECK(!sources_.empty(), "a GTP batch needs at least one source");
  group_ = &sources_.front()->group();
  std::vector<Shape> shapes;
  for (ShardedWeightSource* s : sources_) {
    WEFT_CHECK(&s->group() == group_, "{}: a GTP batch's sources share one gtp group",
               s->parameter().name);
    shapes.push_back(s->sharded().gathered_shape());
  }
  const Shape total = concatenated(shapes, gradient_.start, gradient_.length, "gradient");
  gradient_.ticket = runtime_->cache.reserve(total, DType::f32, Use::gradient);
}

SourceBatch::~SourceBatch() { runtime_->chain.forget(*this); }

bool SourceBatch::full_accumulation() const {
  return runtime_->options.grad_accumulation == GradAccumulation::full;
}

Tensor SourceBatch::part(const Tensor& buffer, const Layout& layout, size_t i) {
  return buffer.narrow(layout.start[i], layout.length[i]);
}

std::vector<Tensor> SourceBatch::materialize(Use use, PassContext& pass) {
  runtime_->chain.materialize(*this, use, pass);
  const Layout& layout = gathered_[index_of(use)];
  const Tensor buffer = runtime_->cache.get(layout.ticket);
  std::vector<Tensor> out;
  for (size_t i = 0; i < sources_.size(); ++i) {
    out.push_back(sources_[i]->decode(part(buffer, layout, i), use));
  }
  return out;
}

std::vector<Tensor> SourceBatch::weights_for_forward(PassContext& pass) {
  return materialize(Use::forward, pass);
}

std::vector<Tensor> SourceBatch::weights_for_backward(PassContext& pass) {
  return materialize(Use::backward, pass);
}

std::vector<Tensor> SourceBatch::quantized_weights(std::span<GemmQuantizer* const> quantizers,
                                                   bool columnwise, PassContext& pass) {
  WEFT_CHECK(quantizers.size() == sources_.size(), "a GTP batch of {} weights got {} quantizers",
             sources_.size(), quantizers.size());
  for (size_t i = 0; i < sources_.size(); ++i) sources_[i]->set_quantizer(*quantizers[i]);
  quantized_ = true;
  return materialize(columnwise ? Use::backward : Use::forward, pass);
}

comm::Work SourceBatch::gather(Use use, const PassContext& pass) {
  std::vector<Shape> shapes;
  DType dtype = DType::f32;
  for (ShardedWeightSource* s : sources_) {
    const auto [shape, dt] = s->gather_buffer(use, pass);
    WEFT_CHECK(shapes.empty() || dt == dtype, "{}: a GTP batch gathers one dtype, got {} and {}",
               s->parameter().name, dtype_name(dtype), dtype_name(dt));
    shapes.push_back(shape);
    dtype = dt;
  }
  Layout& layout = gathered_[index_of(use)];
  std::vector<int64_t> start, length;
  const Shape total = concatenated(shapes, start, length, use_name(use));
  if (layout.ticket < 0) {
    layout.ticket = runtime_->cache.reserve(total, dtype, use);
    layout.start = start;
    layout.length = length;
  }
  WEFT_CHECK(layout.start == start && layout.length == length,
             "a GTP batch's gathered {} weights changed size between passes", use_name(use));
  const Tensor buffer = runtime_->cache.get(layout.ticket);
  std::vector<Tensor> outs, ins;
  for (size_t i = 0; i < sources_.size(); ++i) {
    const ShardedWeightSource::CollectiveArgs a =
        sources_[i]->gather_args(part(buffer, layout, i), use);
    outs.push_back(a.out);
    ins.push_back(a.in);
  }
  return group_->all_gather_coalesced(outs, ins);
}

void SourceBatch::release(Use use) {
  const Layout& layout = gathered_[index_of(use)];
  if (layout.ticket >= 0) runtime_->cache.release(layout.ticket);
}

int64_t SourceBatch::gather_bytes(Use use) const {
  int64_t bytes = 0;
  for (const ShardedWeightSource* s : sources_) bytes += s->gather_bytes(use);
  return bytes;
}

int64_t SourceBatch::shard_elements() const {
  int64_t n = 0;
  for (const ShardedWeightSource* s : sources_) n += s->shard_elements();
  return n;
}

std::vector<Tensor> SourceBatch::gradients() {
  std::vector<Tensor> out;
  if (full_accumulation()) {
    for (ShardedWeightSource* s : sources_) out.push_back(s->accumulated_gradient());
    return out;
  }
  const Tensor buffer = runtime_->cache.get(gradient_.ticket);
  for (size_t i = 0; i < sources_.size(); ++i) out.push_back(part(buffer, gradient_, i));
  return out;
}

std::vector<Tensor> SourceBatch::weight_grads(PassContext&) {
  if (!full_accumulation()) {
    // A reduction of this batch still in flight holds the buffer: finish it.
    if (runtime_->cache.held(gradient_.ticket)) runtime_->chain.complete_reductions();
    runtime_->cache.get(gradient_.ticket).zero();
  }
  std::vector<Tensor> grads = gradients();
  for (size_t i = 0; i < sources_.size(); ++i) {
    grads[i] = grads[i].narrow(0, sources_[i]->sharded().rows());
  }
  return grads;
}

void SourceBatch::finalize_weight_grads(PassContext& pass) {
  WEFT_CHECK(full_accumulation() || runtime_->cache.held(gradient_.ticket),
             "{}: a GTP batch finalized gradients it never handed out (weight_grads)",
             sources_.front()->parameter().name);
  runtime_->chain.reduce(*this, pass);
}

bool SourceBatch::reduce_scatter(const PassContext& pass, comm::Work& work) {
  if (full_accumulation() && !pass.final_microbatch()) return false;
  const std::vector<Tensor> grads = gradients();
  std::vector<Tensor> outs, ins;
  for (size_t i = 0; i < sources_.size(); ++i) {
    const ShardedWeightSource::CollectiveArgs a = sources_[i]->reduce_args(grads[i]);
    outs.push_back(a.out);
    ins.push_back(a.in);
  }
  work = group_->reduce_scatter_coalesced(outs, ins, comm::ReduceOp::avg);
  return true;
}

void SourceBatch::add_reduced() {
  const std::vector<Tensor> grads = gradients();
  for (size_t i = 0; i < sources_.size(); ++i) sources_[i]->add_reduced(grads[i]);
  if (full_accumulation()) {
    for (Tensor g : grads) g.zero();
  } else {
    runtime_->cache.release(gradient_.ticket);
  }
}

void SourceBatch::each_parameter(const std::function<void(Parameter&)>& f) {
  for (ShardedWeightSource* s : sources_) f(s->parameter());
}

}  // namespace weft::parallel::gtp
