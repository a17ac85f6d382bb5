#include "weft/optim/grad_norm.h"

#include <algorithm>
#include <cmath>

#include "weft/kernels/optimizer.h"

namespace weft::optim {

namespace {

// Whether this rank counts p's elements: it is rank 0 of every group p is
// replicated over (but those of `skip`).
bool owner(const nn::Parameter& p, const Groups& groups, const std::vector<std::string>& skip) {
  for (const std::string& name : p.spec.replicated_over) {
    if (std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    auto it = groups.find(name);
    if (it != groups.end() && it->second && it->second->rank() != 0) return false;
  }
  return true;
}

// The gradients this rank counts.
std::vector<Tensor> counted_gradients(const std::vector<nn::Parameter*>& params,
                                      const Groups& groups) {
  std::vector<Tensor> counted;
  counted.reserve(params.size());
  for (const nn::Parameter* p : params) {
    // Row padding (generalized tensor parallelism) is no element of the
    // model; a shared slice's common rows count on one of its ranks.
    if (owner(*p, groups, {})) counted.push_back(nn::counted_part(p->spec, p->grad));
  }
  return counted;
}

// One f64 per group: each rank's partial sum keeps all its bits. Waited for
// on `ec` (a stream wait where the backend allows it, nccl).
void sum_over_groups(const Groups& groups, Tensor& t, const ExecContext& ec) {
  for (const auto& [name, g] : groups) {
    if (g && g->size() > 1) g->all_reduce(t).wait(ec);
  }
}

}  // namespace

double global_grad_norm(const std::vector<nn::Parameter*>& params, const Groups& groups,
                        const ExecContext& ec) {
  const std::vector<Tensor> counted = counted_gradients(params, groups);
  // Added in parameter order: the same bits for any thread count.
  double local = 0;
  for (double s : kernels::sum_of_squares_multi(ec, counted)) local += s;
  // One f64 per group: each rank's partial sum keeps all its bits.
  Tensor t = Tensor::empty({1}, DType::f64);
  *t.data<double>() = local;
  sum_over_groups(groups, t, ExecContext::host());
  const double total = *t.data<double>();
  return std::sqrt(std::max(total, 0.0));
}

void global_grad_norm_sum(const std::vector<nn::Parameter*>& params, const Groups& groups,
                          const ExecContext& ec, Tensor& sum_of_squares) {
  const std::vector<Tensor> counted = counted_gradients(params, groups);
  kernels::sum_of_squares_total(ec, counted, sum_of_squares);
  sum_over_groups(groups, sum_of_squares, ec);
}

namespace {

// The counted part of a shard piece's parameter within the piece, in the
// shard (the counted part is a view of p's gradient: one stretch of it);
// undefined when they do not meet.
Tensor counted_stretch(const BucketShard& b, const BucketShard::Piece& piece) {
  const nn::Parameter& p = *piece.param;
  const Tensor part = nn::counted_part(p.spec, p.grad);
  const int64_t first =
      (static_cast<const char*>(part.raw()) - static_cast<const char*>(p.grad.raw())) /
      static_cast<int64_t>(sizeof(float));
  const int64_t from = std::max(first, piece.param_offset);
  const int64_t to = std::min(first + part.numel(), piece.param_offset + piece.length);
  if (from >= to) return Tensor();
  return b.shard.narrow(piece.bucket_offset - b.shard_begin + from - piece.param_offset, to - from);
}

}  // namespace

void sharded_grad_norm_sum(const std::vector<const BucketShard*>& buckets, const Groups& groups,
                           const std::vector<std::string>& data_dims, const ExecContext& ec,
                           Tensor& sum_of_squares) {
  std::vector<Tensor> counted;
  for (const BucketShard* b : buckets) {
    for (const BucketShard::Piece& piece : b->own()) {
      if (!owner(*piece.param, groups, data_dims)) continue;
      if (Tensor t = counted_stretch(*b, piece); t.defined()) counted.push_back(t);
    }
  }
  kernels::sum_of_squares_total(ec, counted, sum_of_squares);
  sum_over_groups(groups, sum_of_squares, ec);
}

BucketNormSums::BucketNormSums(Groups groups, std::vector<std::string> data_dims,
                               const ExecContext& ec)
    : groups_(std::move(groups)), data_dims_(std::move(data_dims)), ec_(ec) {}

void BucketNormSums::observe(GradSync& sync) {
  syncs_.push_back(&sync);
  bucket_sums_.emplace_back(static_cast<size_t>(sync.num_buckets()), 0.0);
  partial_sums_.push_back(0.0);
  sync.set_observer(this);
}

size_t BucketNormSums::index_of(const GradSync& sync) const {
  const auto it = std::find(syncs_.begin(), syncs_.end(), &sync);
  WEFT_CHECK(it != syncs_.end(), "a gradient sync the norm's sums do not observe");
  return static_cast<size_t>(it - syncs_.begin());
}

double BucketNormSums::sum(const std::vector<Tensor>& counted) const {
  double total = 0;
  for (double s : kernels::sum_of_squares_multi(ec_, counted)) total += s;
  return total;
}

void BucketNormSums::bucket_final(const GradSync& sync, int64_t index) {
  std::vector<Tensor> counted;
  if (sync.sharded()) {
    const BucketShard& b = sync.bucket_shard(index);
    for (const BucketShard::Piece& piece : b.own()) {
      const nn::Parameter& p = *piece.param;
      if (GradSync::summed_after(p) || !owner(p, groups_, data_dims_)) continue;
      if (Tensor t = counted_stretch(b, piece); t.defined()) counted.push_back(t);
    }
  } else {
    for (const nn::Parameter* p : sync.bucket_parameters(index)) {
      if (GradSync::summed_after(*p) || !owner(*p, groups_, {})) continue;
      counted.push_back(nn::counted_part(p->spec, p->grad));
    }
  }
  bucket_sums_[index_of(sync)][static_cast<size_t>(index)] = sum(counted);
}

void BucketNormSums::partials_final(const GradSync& sync) {
  std::vector<Tensor> counted;
  if (sync.sharded()) {
    for (int64_t i = 0; i < sync.num_buckets(); ++i) {
      const BucketShard& b = sync.bucket_shard(i);
      for (const BucketShard::Piece& piece : b.own()) {
        const nn::Parameter& p = *piece.param;
        if (!GradSync::summed_after(p) || !owner(p, groups_, data_dims_)) continue;
        if (Tensor t = counted_stretch(b, piece); t.defined()) counted.push_back(t);
      }
    }
  } else {
    for (const nn::Parameter* p : sync.parameters()) {
      if (!GradSync::summed_after(*p) || !owner(*p, groups_, {})) continue;
      counted.push_back(nn::counted_part(p->spec, p->grad));
    }
  }
  partial_sums_[index_of(sync)] = sum(counted);
}

void BucketNormSums::total(Tensor& sum_of_squares) {
  WEFT_CHECK(sum_of_squares.device().is_cpu() && sum_of_squares.dtype() == DType::f64,
             "the bucket norm's sums go into a host f64 scalar");
  double local = 0;
  for (size_t j = 0; j < syncs_.size(); ++j) {
    for (double& s : bucket_sums_[j]) {
      local += s;
      s = 0;
    }
    local += partial_sums_[j];
    partial_sums_[j] = 0;
  }
  *sum_of_squares.data<double>() = local;
  sum_over_groups(groups_, sum_of_squares, ec_);
}

float clip_scale(double norm, double max_norm) {
  if (max_norm <= 0 || !(norm > max_norm)) return 1.0f;
  return static_cast<float>(max_norm / (norm + 1e-6));
}

}  // namespace weft::optim
