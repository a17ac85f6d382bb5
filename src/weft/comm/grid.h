// Grid: the ranks of a world arranged along named dimensions.
//
// The order string lists the dimensions, the first varying fastest:
// with "tp-gtp-dp" and sizes T, G, D, world rank r has coordinates
// tp = r % T, gtp = (r / T) % G, dp = r / (T * G). The group of a dimension
// that holds rank r is every rank whose other coordinates equal r's: with
// world 8 and tp 4 ("tp-dp"), TP groups are [0,1,2,3] [4,5,6,7] and DP groups
// [0,4] [1,5] [2,6] [3,7]. Every rank is in exactly one group per dimension.
//
// GridLayout is the arithmetic alone (what `weft topology` prints); Grid also
// creates the process groups with new_subgroups_by_enumeration.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "weft/comm/process_group.h"

namespace weft::comm {

class GridLayout {
 public:
  // order: "tp-gtp-dp"; sizes: a size for each name of the order, except at
  // most one, which is inferred from the world size. Throws weft::Error for
  // unknown or repeated names, sizes below 1 and sizes that do not fit the world.
  GridLayout(int world, const std::string& order,
             const std::vector<std::pair<std::string, int>>& sizes);

  int world() const { return world_; }
  // "tp-gtp-dp"
  std::string order() const;
  // Dimension names, fastest first, and their sizes.
  const std::vector<std::string>& names() const { return names_; }
  int size(const std::string& dim) const;
  bool has(const std::string& dim) const;

  // The coordinate of world rank `rank` along `dim`.
  int coord(const std::string& dim, int rank) const;
  // The world ranks of the `dim` group that holds `rank`, in coordinate order.
  std::vector<int> group_of(const std::string& dim, int rank) const;
  // All groups of `dim`, ordered by their smallest rank.
  std::vector<std::vector<int>> groups(const std::string& dim) const;
  // The groups spanning several dimensions (ranks equal in every other
  // coordinate, "gtp" and "dp" together: the replicas that see different
  // data), each in world-rank order, ordered by their smallest rank.
  std::vector<std::vector<int>> groups_across(const std::vector<std::string>& dims) const;

 private:
  size_t index(const std::string& dim) const;

  int world_;
  std::vector<std::string> names_;
  std::vector<int> sizes_;
  std::vector<int> strides_;
};

class Grid {
 public:
  // Collective over `world`: builds one group per dimension for this rank.
  // Group names are the dimension names.
  Grid(ProcessGroup& world, const std::string& order,
       const std::vector<std::pair<std::string, int>>& sizes);

  const GridLayout& layout() const { return layout_; }
  int size(const std::string& dim) const { return layout_.size(dim); }
  // This rank's position in its `dim` group (= the group's rank()).
  int rank_in(const std::string& dim) const;
  ProcessGroup& group(const std::string& dim) const;
  std::shared_ptr<ProcessGroup> group_ptr(const std::string& dim) const;
  // All groups of `dim` as lists of world ranks.
  std::vector<std::vector<int>> groups(const std::string& dim) const { return layout_.groups(dim); }

 private:
  GridLayout layout_;
  int world_rank_;
  std::map<std::string, std::shared_ptr<ProcessGroup>> groups_;
};

}  // namespace weft::comm
