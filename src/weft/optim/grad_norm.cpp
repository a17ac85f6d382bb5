#include "weft/optim/grad_norm.h"

#include <algorithm>
#include <cmath>

#include "weft/kernels/optimizer.h"

namespace weft::optim {

double global_grad_norm(const std::vector<nn::Parameter*>& params, const Groups& groups,
                        const ExecContext& ec) {
  double local = 0;
  for (const nn::Parameter* p : params) {
    bool owner = true;
    for (const std::string& name : p->spec.replicated_over) {
      auto it = groups.find(name);
      if (it != groups.end() && it->second && it->second->rank() != 0) owner = false;
    }
    if (owner) local += kernels::sum_of_squares(ec, p->grad);
  }
  // The group reductions are f32: send the f64 partial as a hi and a lo word,
  // which keeps more of each rank's bits than one word (the sum is f32-accurate).
  float hi = static_cast<float>(local);
  float lo = static_cast<float>(local - static_cast<double>(hi));
  Tensor t = Tensor::from({2}, std::vector<float>{hi, lo});
  for (const auto& [name, g] : groups) {
    if (g && g->size() > 1) g->all_reduce(t).wait();
  }
  double total = static_cast<double>(t.item(0)) + static_cast<double>(t.item(1));
  return std::sqrt(std::max(total, 0.0));
}

float clip_scale(double norm, double max_norm) {
  if (max_norm <= 0 || !(norm > max_norm)) return 1.0f;
  return static_cast<float>(max_norm / (norm + 1e-6));
}

}  // namespace weft::optim
