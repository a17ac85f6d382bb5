// Shared slices (ShardSpec::shared, replicated key/value heads): which rows
// each rank holds, the whole slice joined back from the sharing ranks, the
// common rows that gradient sync sums and the part a norm counts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "weft/parallel/parameter.h"

namespace weft::parallel {
namespace {

// A (rows, 2) tensor whose row i holds i and -i: rows name themselves.
Tensor numbered(int64_t rows) {
  std::vector<float> v;
  for (int64_t i = 0; i < rows; ++i) {
    v.push_back(static_cast<float>(i));
    v.push_back(static_cast<float>(-i));
  }
  return Tensor::from({rows, 2}, v);
}

// Row numbers of a numbered tensor's rows.
std::vector<int64_t> rows_of(const Tensor& t) {
  std::vector<int64_t> out;
  const std::vector<float> v = t.to_vector();
  for (size_t i = 0; i < v.size(); i += 2) out.push_back(static_cast<int64_t>(v[i]));
  return out;
}

// The qkv rows of 8 query heads over 2 KV heads (4 query blocks, k, v; each
// block 2 heads of one row) at TP 4: 2 positions, each shared by 2 ranks.
TEST(SharedSlice, RanksHoldTheirDealtBlocksThenTheCommonOnes) {
  const Tensor full = numbered(12);
  const std::vector<std::vector<int64_t>> expect = {
      {0, 4, 8, 10},  // rank 0: KV head 0, query blocks 0 and 2, k0, v0
      {1, 5, 9, 11},  // rank 1: KV head 1, query blocks 0 and 2
      {2, 6, 8, 10},  // rank 2: KV head 0, query blocks 1 and 3
      {3, 7, 9, 11}};
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(r);
    const ShardSpec s = shared_split_spec(full.shape(), "tp", r, 4, 2, 6, 4);
    EXPECT_EQ(s.shared, 2);
    EXPECT_EQ(s.shared_rank, r / 2);
    EXPECT_EQ(s.tp_rows(), 4);
    EXPECT_EQ(rows_of(shard_of(s, full)), expect[static_cast<size_t>(r)]);
    EXPECT_EQ(rows_of(common_rows(s, shard_of(s, full))),
              (std::vector<int64_t>{8 + r % 2, 10 + r % 2}));
    // Norms count the common rows on shared rank 0 only.
    EXPECT_EQ(counted_part(s, shard_of(s, full)).size(0), r < 2 ? 4 : 2);
  }
}

TEST(SharedSlice, JoinedFromItsRanksIsTheSliceOfOnePosition) {
  const Tensor full = numbered(12);
  for (int position = 0; position < 2; ++position) {
    // Ranks `position` and position + 2 share it; an all-gather concatenates
    // their tensors by shared rank.
    const ShardSpec first = shared_split_spec(full.shape(), "tp", position, 4, 2, 6, 4);
    const ShardSpec second = shared_split_spec(full.shape(), "tp", position + 2, 4, 2, 6, 4);
    Tensor gathered = Tensor::empty({8, 2});
    gathered.narrow(0, 4).copy_from(shard_of(first, full));
    gathered.narrow(4, 4).copy_from(shard_of(second, full));
    const Tensor slice = joined_slice(second, gathered);
    EXPECT_EQ(slice.to_vector(), shard_of(first.shared_slice(), full).to_vector());
    EXPECT_EQ(rows_of(slice), (std::vector<int64_t>{position, position + 2, position + 4,
                                                    position + 6, position + 8, position + 10}));
    EXPECT_EQ(held_part(first, slice).to_vector(), shard_of(first, full).to_vector());
  }
}

TEST(SharedSlice, OnePositionSharedByEveryRank) {
  const Tensor full = numbered(6);  // 4 query blocks of 1 head, k, v
  const ShardSpec s = shared_split_spec(full.shape(), "tp", 3, 4, 1, 6, 4);
  EXPECT_EQ(s.shared, 4);
  EXPECT_EQ(rows_of(shard_of(s, full)), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(s.held_blocks(), (std::vector<int64_t>{3, 4, 5}));
}

TEST(SharedSlice, ImpossibleSplitsAreRefused) {
  const Shape g{12, 2};
  EXPECT_THROW(shared_split_spec(g, "tp", 0, 4, 3, 6, 4), Error);  // 3 positions over 4 ranks
  EXPECT_THROW(shared_split_spec(g, "tp", 0, 4, 2, 6, 3), Error);  // 3 blocks over 2 sharers
  EXPECT_THROW(shared_split_spec(g, "tp", 0, 4, 2, 5, 4), Error);  // 12 rows in 5 blocks
  ShardSpec s = shared_split_spec(g, "tp", 0, 4, 2, 6, 4);
  EXPECT_THROW(row_split_spec(s, "gtp", 0, 2, 1), Error);  // no GTP row split on top
}

}  // namespace
}  // namespace weft::parallel
