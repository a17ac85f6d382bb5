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

void sharded_grad_norm_sum(const std::vector<const BucketShard*>& buckets, const Groups& groups,
                           const std::vector<std::string>& data_dims, const ExecContext& ec,
                           Tensor& sum_of_squares) {
  std::vector<Tensor> counted;
  for (const BucketShard* b : buckets) {
    for (const BucketShard::Piece& piece : b->own()) {
      const nn::Parameter& p = *piece.param;
      if (!owner(p, groups, data_dims)) continue;
      // The counted part's elements within the piece (the part is a view of
      // p's gradient: one stretch of it).
      const Tensor part = nn::counted_part(p.spec, p.grad);
      const int64_t first =
          (static_cast<const char*>(part.raw()) - static_cast<const char*>(p.grad.raw())) /
          static_cast<int64_t>(sizeof(float));
      const int64_t from = std::max(first, piece.param_offset);
      const int64_t to = std::min(first + part.numel(), piece.param_offset + piece.length);
      if (from >= to) continue;
      counted.push_back(b->shard.narrow(
          piece.bucket_offset - b->shard_begin + from - piece.param_offset, to - from));
    }
  }
  kernels::sum_of_squares_total(ec, counted, sum_of_squares);
  sum_over_groups(groups, sum_of_squares, ec);
}

float clip_scale(double norm, double max_norm) {
  if (max_norm <= 0 || !(norm > max_norm)) return 1.0f;
  return static_cast<float>(max_norm / (norm + 1e-6));
}

}  // namespace weft::optim
