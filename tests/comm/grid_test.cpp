#include "weft/comm/grid.h"

#include <gtest/gtest.h>

#include "weft/core/error.h"

namespace weft::comm {
namespace {

using Lists = std::vector<std::vector<int>>;

TEST(GridLayout, DocumentedExampleWorld8Tp4) {
  GridLayout g(8, "tp-dp", {{"tp", 4}});
  EXPECT_EQ(g.size("dp"), 2);
  EXPECT_EQ(g.groups("tp"), (Lists{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(g.groups("dp"), (Lists{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(g.coord("tp", 6), 2);
  EXPECT_EQ(g.coord("dp", 6), 1);
}

TEST(GridLayout, GoldenWorld16Tp2Gtp2Dp4) {
  GridLayout g(16, "tp-gtp-dp", {{"tp", 2}, {"gtp", 2}, {"dp", 4}});
  EXPECT_EQ(g.groups("tp"),
            (Lists{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(g.groups("gtp"),
            (Lists{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(g.groups("dp"), (Lists{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
  // Every rank is in exactly one group per dimension.
  for (const auto& dim : g.names()) {
    std::vector<int> count(16, 0);
    for (const auto& group : g.groups(dim))
      for (int r : group) ++count[static_cast<size_t>(r)];
    EXPECT_EQ(count, std::vector<int>(16, 1)) << dim;
  }
}

// The gtp and dp groups together: the ranks that see different data.
TEST(GridLayout, GroupsAcrossDimensions) {
  GridLayout g(16, "tp-gtp-dp", {{"tp", 2}, {"gtp", 2}, {"dp", 4}});
  EXPECT_EQ(g.groups_across({"gtp", "dp"}),
            (Lists{{0, 2, 4, 6, 8, 10, 12, 14}, {1, 3, 5, 7, 9, 11, 13, 15}}));
  EXPECT_EQ(g.groups_across({"tp"}), g.groups("tp"));
  EXPECT_EQ(g.groups_across({"tp", "gtp", "dp"}).size(), 1u);
  EXPECT_THROW(g.groups_across({"pp"}), Error);
}

TEST(GridLayout, OrderDecidesWhichDimensionIsContiguous) {
  GridLayout g(8, "dp-tp", {{"tp", 4}});
  EXPECT_EQ(g.groups("dp"), (Lists{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.groups("tp"), (Lists{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(g.order(), "dp-tp");
}

std::string error_of(int world, const std::string& order,
                     const std::vector<std::pair<std::string, int>>& sizes) {
  try {
    GridLayout g(world, order, sizes);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(GridLayout, ErrorsNameTheProblem) {
  EXPECT_EQ(error_of(6, "tp-gtp-dp", {{"tp", 2}, {"gtp", 2}}),
            "world size 6 is not divisible by tp*gtp = 4");
  EXPECT_EQ(error_of(8, "tp-dp", {{"tp", 4}, {"dp", 4}}),
            "tp*dp = 16 does not equal the world size 8");
  EXPECT_EQ(error_of(8, "tp-dp", {{"pp", 2}}),
            "a size is given for 'pp', which is not a dimension of the grid order 'tp-dp'");
  EXPECT_EQ(error_of(8, "tp-dp", {{"tp", 0}}), "the size of 'tp' must be at least 1, got 0");
  EXPECT_EQ(error_of(8, "tp-gtp-dp", {{"tp", 2}}),
            "the sizes of 'gtp' and 'dp' are both missing; give all but one");
  EXPECT_EQ(error_of(8, "tp--dp", {}),
            "the grid order 'tp--dp' has an empty dimension name; write "
            "names separated by '-', e.g. tp-gtp-dp");
  EXPECT_EQ(error_of(8, "tp-tp", {}), "the grid order 'tp-tp' names 'tp' twice");
  EXPECT_EQ(error_of(0, "tp", {}), "the world size must be at least 1, got 0");
  GridLayout g(4, "tp-dp", {{"tp", 2}});
  try {
    g.groups("ep");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "the grid has no dimension 'ep'; it has tp-dp");
  }
}

}  // namespace
}  // namespace weft::comm
