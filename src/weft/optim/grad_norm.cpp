#include "weft/optim/grad_norm.h"

#include <algorithm>
#include <cmath>

#include "weft/kernels/optimizer.h"

namespace weft::optim {

namespace {

// The gradients this rank counts.
std::vector<Tensor> counted_gradients(const std::vector<nn::Parameter*>& params,
                                      const Groups& groups) {
  std::vector<Tensor> counted;
  counted.reserve(params.size());
  for (const nn::Parameter* p : params) {
    bool owner = true;
    for (const std::string& name : p->spec.replicated_over) {
      auto it = groups.find(name);
      if (it != groups.end() && it->second && it->second->rank() != 0) owner = false;
    }
    // Row padding (generalized tensor parallelism) is no element of the
    // model; a shared slice's common rows count on one of its ranks.
    if (owner) counted.push_back(nn::counted_part(p->spec, p->grad));
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

float clip_scale(double norm, double max_norm) {
  if (max_norm <= 0 || !(norm > max_norm)) return 1.0f;
  return static_cast<float>(max_norm / (norm + 1e-6));
}

}  // namespace weft::optim
