#include "weft/comm/grid.h"

#include <algorithm>
#include <cctype>

#include "weft/core/error.h"

namespace weft::comm {

namespace {

std::vector<std::string> split_order(const std::string& order) {
  std::vector<std::string> names;
  size_t start = 0;
  for (;;) {
    size_t dash = order.find('-', start);
    std::string name = order.substr(start, dash == std::string::npos ? dash : dash - start);
    WEFT_CHECK(!name.empty(),
               "the grid order '{}' has an empty dimension name; write names "
               "separated by '-', e.g. tp-gtp-dp",
               order);
    for (char c : name)
      WEFT_CHECK(std::isalnum(static_cast<unsigned char>(c)) || c == '_',
                 "the grid order '{}' has an invalid dimension name '{}'", order, name);
    WEFT_CHECK(std::find(names.begin(), names.end(), name) == names.end(),
               "the grid order '{}' names '{}' twice", order, name);
    names.push_back(name);
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  return names;
}

}  // namespace

GridLayout::GridLayout(int world, const std::string& order,
                       const std::vector<std::pair<std::string, int>>& sizes)
    : world_(world), names_(split_order(order)), sizes_(names_.size(), 0) {
  WEFT_CHECK(world >= 1, "the world size must be at least 1, got {}", world);
  for (const auto& [name, n] : sizes) {
    auto it = std::find(names_.begin(), names_.end(), name);
    WEFT_CHECK(it != names_.end(),
               "a size is given for '{}', which is not a dimension of the grid "
               "order '{}'",
               name, order);
    WEFT_CHECK(n >= 1, "the size of '{}' must be at least 1, got {}", name, n);
    size_t i = static_cast<size_t>(it - names_.begin());
    WEFT_CHECK(sizes_[i] == 0, "the size of '{}' is given twice", name);
    sizes_[i] = n;
  }
  int64_t known = 1;
  std::string known_names;
  int unknown = -1;
  for (size_t i = 0; i < names_.size(); ++i) {
    if (sizes_[i] == 0) {
      WEFT_CHECK(unknown < 0, "the sizes of '{}' and '{}' are both missing; give all but one",
                 names_[static_cast<size_t>(unknown)], names_[i]);
      unknown = static_cast<int>(i);
    } else {
      known *= sizes_[i];
      known_names += (known_names.empty() ? "" : "*") + names_[i];
    }
  }
  if (unknown >= 0) {
    WEFT_CHECK(world % known == 0, "world size {} is not divisible by {} = {}", world, known_names,
               known);
    sizes_[static_cast<size_t>(unknown)] = static_cast<int>(world / known);
  } else {
    WEFT_CHECK(known == world, "{} = {} does not equal the world size {}", known_names, known,
               world);
  }
  int stride = 1;
  for (int s : sizes_) {
    strides_.push_back(stride);
    stride *= s;
  }
}

std::string GridLayout::order() const {
  std::string out;
  for (const auto& n : names_) out += (out.empty() ? "" : "-") + n;
  return out;
}

size_t GridLayout::index(const std::string& dim) const {
  auto it = std::find(names_.begin(), names_.end(), dim);
  WEFT_CHECK(it != names_.end(), "the grid has no dimension '{}'; it has {}", dim, order());
  return static_cast<size_t>(it - names_.begin());
}

bool GridLayout::has(const std::string& dim) const {
  return std::find(names_.begin(), names_.end(), dim) != names_.end();
}

int GridLayout::size(const std::string& dim) const { return sizes_[index(dim)]; }

int GridLayout::coord(const std::string& dim, int rank) const {
  WEFT_CHECK(rank >= 0 && rank < world_, "rank {} is outside the world of {}", rank, world_);
  size_t i = index(dim);
  return rank / strides_[i] % sizes_[i];
}

std::vector<int> GridLayout::group_of(const std::string& dim, int rank) const {
  size_t i = index(dim);
  int base = rank - coord(dim, rank) * strides_[i];
  std::vector<int> out;
  for (int c = 0; c < sizes_[i]; ++c) out.push_back(base + c * strides_[i]);
  return out;
}

std::vector<std::vector<int>> GridLayout::groups(const std::string& dim) const {
  std::vector<std::vector<int>> out;
  for (int r = 0; r < world_; ++r)
    if (coord(dim, r) == 0) out.push_back(group_of(dim, r));
  return out;
}

std::vector<std::vector<int>> GridLayout::groups_across(
    const std::vector<std::string>& dims) const {
  for (const std::string& d : dims) size(d);  // names the problem for an unknown dimension
  std::map<std::vector<int>, size_t> index;   // the other coordinates -> group
  std::vector<std::vector<int>> out;
  for (int r = 0; r < world_; ++r) {
    std::vector<int> others;
    for (const std::string& n : names_) {
      if (std::find(dims.begin(), dims.end(), n) == dims.end()) others.push_back(coord(n, r));
    }
    auto [it, fresh] = index.emplace(others, out.size());
    if (fresh) out.emplace_back();
    out[it->second].push_back(r);
  }
  return out;
}

Grid::Grid(ProcessGroup& world, const std::string& order,
           const std::vector<std::pair<std::string, int>>& sizes)
    : layout_(world.size(), order, sizes), world_rank_(world.rank()) {
  for (const auto& dim : layout_.names()) {
    auto group = world.new_subgroups_by_enumeration(layout_.groups(dim), dim);
    WEFT_CHECK(group, "internal: rank {} is in no '{}' group", world_rank_, dim);
    groups_[dim] = std::move(group);
  }
}

int Grid::rank_in(const std::string& dim) const { return layout_.coord(dim, world_rank_); }

ProcessGroup& Grid::group(const std::string& dim) const { return *group_ptr(dim); }

std::shared_ptr<ProcessGroup> Grid::group_ptr(const std::string& dim) const {
  layout_.size(dim);  // names the problem for an unknown dimension
  return groups_.at(dim);
}

}  // namespace weft::comm
