#include "weft/optim/distributed_optimizer.h"

#include <algorithm>

namespace weft::optim {

namespace {

// Elements [offset, +length) of p's value (f32, contiguous).
Tensor stretch(const Tensor& t, int64_t offset, int64_t length) {
  return t.reshape({t.numel()}).narrow(offset, length);
}

}  // namespace

DistributedOptimizer::DistributedOptimizer(std::vector<nn::Parameter*> params,
                                           std::vector<const GradSync*> syncs, AdamWOptions options,
                                           const ExecContext& ec)
    : params_(std::move(params)), options_(options), ec_(ec) {
  for (const GradSync* sync : syncs) {
    WEFT_CHECK(sync->sharded(), "the distributed optimizer needs sharded gradient buckets");
    // Buckets run in reverse parameter order: backwards is the forward's.
    for (int64_t i = sync->num_buckets() - 1; i >= 0; --i) {
      const BucketShard& b = sync->bucket_shard(i);
      Shard s;
      s.bucket = &b;
      s.own = b.own();
      s.m = ec_.zeros({b.shard.numel()}, DType::f32, MemoryTag::optimizer);
      s.v = ec_.zeros({b.shard.numel()}, DType::f32, MemoryTag::optimizer);
      shards_.push_back(std::move(s));
    }
  }
}

std::vector<const BucketShard*> DistributedOptimizer::buckets() const {
  std::vector<const BucketShard*> out;
  for (const Shard& s : shards_) out.push_back(s.bucket);
  return out;
}

int64_t DistributedOptimizer::state_bytes() const {
  int64_t n = 0;
  for (const Shard& s : shards_) n += s.m.nbytes() + s.v.nbytes();
  return n;
}

int64_t DistributedOptimizer::index_of(const nn::Parameter* p) const {
  const auto it = std::find(params_.begin(), params_.end(), p);
  WEFT_CHECK(it != params_.end(), "parameter {} is not one of the optimizer's", p->name);
  return it - params_.begin();
}

void DistributedOptimizer::step(float lr, const Tensor& grad_scale) {
  ++step_;
  const kernels::AdamWConfig cfg{.lr = lr,
                                 .beta1 = options_.beta1,
                                 .beta2 = options_.beta2,
                                 .eps = options_.eps,
                                 .weight_decay = options_.weight_decay,
                                 .step = step_,
                                 .grad_scale = 1.0f,
                                 .grad_scale_from = &grad_scale};
  std::vector<comm::Work> gathers(shards_.size());
  for (size_t i = 0; i < shards_.size(); ++i) {
    Shard& s = shards_[i];
    const BucketShard& b = *s.bucket;
    // The views the kernel updates (it holds pointers to them).
    std::vector<Tensor> views;
    views.reserve(4 * s.own.size());
    std::vector<kernels::AdamWSegment> segments;
    segments.reserve(s.own.size());
    for (const BucketShard::Piece& piece : s.own) {
      const int64_t at = piece.bucket_offset - b.shard_begin;
      views.push_back(stretch(piece.param->value, piece.param_offset, piece.length));
      views.push_back(b.shard.narrow(at, piece.length));
      views.push_back(s.m.narrow(at, piece.length));
      views.push_back(s.v.narrow(at, piece.length));
    }
    for (size_t k = 0; k < s.own.size(); ++k) {
      segments.push_back({.params = &views[4 * k],
                          .grads = &views[4 * k + 1],
                          .m = &views[4 * k + 2],
                          .v = &views[4 * k + 3],
                          .decay = s.own[k].param->decay});
    }
    if (!segments.empty()) kernels::adamw_step_multi(ec_, segments, cfg);
    if (b.group == nullptr) continue;
    // The updated shard replaces the gradient in the bucket buffer and is
    // gathered in place; the gradients are spent.
    for (size_t k = 0; k < s.own.size(); ++k) views[4 * k + 1].copy_from(views[4 * k]);
    gathers[i] = b.group->all_gather(b.flat, b.shard);
  }
  for (size_t i = 0; i < shards_.size(); ++i) {
    const BucketShard& b = *shards_[i].bucket;
    for (const BucketShard::Piece& piece : b.pieces)
      ++piece.param->version;  // weight sources recast
    if (b.group == nullptr) continue;
    gathers[i].wait(ec_);
    // Every parameter's stretch from the gathered buffer (this rank's own
    // stretches hold the same values already).
    for (const BucketShard::Piece& piece : b.pieces) {
      stretch(piece.param->value, piece.param_offset, piece.length)
          .copy_from(b.flat.narrow(piece.bucket_offset, piece.length));
    }
  }
}

std::unique_ptr<AdamW> DistributedOptimizer::gathered() const {
  auto whole = std::make_unique<AdamW>(params_, options_, ec_);
  whole->set_steps_taken(step_);
  for (const Shard& s : shards_) {
    const BucketShard& b = *s.bucket;
    for (int which = 0; which < 2; ++which) {
      const Tensor& mine = which == 0 ? s.m : s.v;
      Tensor all = mine;
      if (b.group != nullptr) {
        all = ec_.empty({b.flat.numel()}, DType::f32, MemoryTag::optimizer);
        b.group->all_gather(all, mine).wait(ec_);
      }
      std::vector<Tensor>& moments = which == 0 ? whole->first_moments() : whole->second_moments();
      for (const BucketShard::Piece& piece : b.pieces) {
        stretch(moments[static_cast<size_t>(index_of(piece.param))], piece.param_offset,
                piece.length)
            .copy_from(
                all.narrow(piece.bucket_offset - (b.group ? 0 : b.shard_begin), piece.length));
      }
    }
  }
  return whole;
}

void DistributedOptimizer::load(AdamW& whole) {
  WEFT_CHECK(whole.parameters() == params_,
             "loading the distributed optimizer from an AdamW over other parameters");
  step_ = whole.steps_taken();
  for (Shard& s : shards_) {
    const BucketShard& b = *s.bucket;
    s.m.zero();
    s.v.zero();
    for (const BucketShard::Piece& piece : s.own) {
      const auto i = static_cast<size_t>(index_of(piece.param));
      const int64_t at = piece.bucket_offset - b.shard_begin;
      s.m.narrow(at, piece.length)
          .copy_from(stretch(whole.first_moments()[i], piece.param_offset, piece.length));
      s.v.narrow(at, piece.length)
          .copy_from(stretch(whole.second_moments()[i], piece.param_offset, piece.length));
    }
  }
}

}  // namespace weft::optim
