#include "weft/train/layout.h"

#include <algorithm>
#include <map>

namespace weft::train {

std::unique_ptr<comm::Grid> make_grid(comm::ProcessGroup& world, const TrainConfig& cfg, int dp) {
  std::vector<std::pair<std::string, int>> sizes{{"tp", cfg.tp}};
  if (cfg.cp > 1) sizes.emplace_back("cp", cfg.cp);
  if (cfg.ep > 1) sizes.emplace_back("ep", cfg.ep);
  if (cfg.gtp > 1) sizes.emplace_back("gtp", cfg.gtp);
  sizes.emplace_back("dp", dp);
  // Pipeline stages vary slowest: a stage's tp, ep, gtp and dp ranks are neighbours.
  if (cfg.pp > 1) sizes.emplace_back("pp", cfg.pp);
  std::string order;
  for (const auto& [name, size] : sizes) order += (order.empty() ? "" : "-") + name;
  return std::make_unique<comm::Grid>(world, order, sizes);
}

std::vector<std::string> data_dims(const comm::GridLayout& layout) {
  std::vector<std::string> out;
  for (const char* dim : {"cp", "ep", "gtp", "dp"}) {
    if (layout.has(dim)) out.emplace_back(dim);
  }
  return out;
}

std::shared_ptr<comm::ProcessGroup> group_across(comm::ProcessGroup& world, const comm::Grid& grid,
                                                 const std::vector<std::string>& dims) {
  WEFT_CHECK(!dims.empty(), "a group across no dimensions");
  if (dims.size() == 1) return grid.group_ptr(dims.front());
  std::string name;
  for (const std::string& d : dims) name += (name.empty() ? "" : "-") + d;
  return world.new_subgroups_by_enumeration(grid.layout().groups_across(dims), name);
}

GradSyncs::GradSyncs(comm::ProcessGroup& world, const comm::Grid& grid,
                     std::shared_ptr<comm::ProcessGroup> data_group,
                     const std::vector<nn::Parameter*>& params, int64_t bucket_bytes,
                     const ExecContext& ec, bool shard) {
  // The data dimensions each parameter is averaged over; std::map orders the
  // sets alike on every rank, so the groups are created in the same order.
  std::map<std::vector<std::string>, std::vector<nn::Parameter*>> by_dims;
  for (nn::Parameter* p : params) {
    std::vector<std::string> dims;
    for (const std::string& d : data_dims(grid.layout())) {
      const auto& over = p->spec.replicated_over;
      if (std::find(over.begin(), over.end(), d) != over.end()) dims.push_back(d);
    }
    by_dims[dims].push_back(p);
  }
  for (auto& [dims, ps] : by_dims) {
    // No data dimension (a weight every data rank holds a different part of):
    // only its grad_sum_group sums run.
    auto group = dims.empty()                       ? nullptr
                 : dims == data_dims(grid.layout()) ? data_group
                                                    : group_across(world, grid, dims);
    syncs_.push_back(std::make_unique<optim::GradSync>(ps, group, bucket_bytes, ec, shard));
    for (const nn::Parameter* p : ps) of_[p] = syncs_.back().get();
  }
}

void GradSyncs::mark_ready(const nn::Parameter* p) {
  const auto it = of_.find(p);
  WEFT_CHECK(it != of_.end(), "parameter {} is not one of the model's", p->name);
  it->second->mark_ready(p);
}

void GradSyncs::set_sync(bool on) {
  for (auto& s : syncs_) s->set_sync(on);
}

void GradSyncs::finish() {
  for (auto& s : syncs_) s->finish();
}

std::vector<const optim::GradSync*> GradSyncs::syncs() const {
  std::vector<const optim::GradSync*> out;
  for (const auto& s : syncs_) out.push_back(s.get());
  return out;
}

void GradSyncs::observe(optim::BucketNormSums& sums) {
  for (auto& s : syncs_) sums.observe(*s);
}

}  // namespace weft::train
