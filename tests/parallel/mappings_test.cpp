// The seven TP/SP mappings, forward and backward, at world sizes 1, 2 and 4
// on the local backend, with inputs whose exact result is known: each rank
// contributes its rank number (so a sum over ranks 0..3 is exactly 6), and a
// gather must put rank r's block at position r.
#include "weft/parallel/mappings.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "contexts.h"
#include "weft/comm/local.h"

namespace weft::parallel {
namespace {

// A (d0, d1, d2) tensor with element (i, j, k) = f(i, j, k).
Tensor make(const Shape& s, const std::function<float(int64_t, int64_t, int64_t)>& f) {
  Tensor t = Tensor::empty(s);
  float* p = t.data<float>();
  for (int64_t i = 0; i < s[0]; ++i) {
    for (int64_t j = 0; j < s[1]; ++j) {
      for (int64_t k = 0; k < s[2]; ++k) p[(i * s[1] + j) * s[2] + k] = f(i, j, k);
    }
  }
  return t;
}

// Fails at the first element of t that differs from f(i, j, k).
::testing::AssertionResult holds(const Tensor& t, const Shape& s,
                                 const std::function<float(int64_t, int64_t, int64_t)>& f) {
  if (!(t.shape() == s))
    return ::testing::AssertionFailure() << "shape " << t.shape() << " != " << s;
  std::vector<float> v = t.to_vector();
  for (int64_t i = 0; i < s[0]; ++i) {
    for (int64_t j = 0; j < s[1]; ++j) {
      for (int64_t k = 0; k < s[2]; ++k) {
        const float got = v[static_cast<size_t>((i * s[1] + j) * s[2] + k)], want = f(i, j, k);
        if (got != want) {
          return ::testing::AssertionFailure() << "element (" << i << ", " << j << ", " << k
                                               << "): got " << got << ", expected " << want;
        }
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// A unique, exactly representable value for a coordinate.
float code(int64_t i, int64_t j, int64_t k) { return static_cast<float>(i * 10000 + j * 100 + k); }

Shape scaled(Shape s, int dim, int64_t n) {
  s[dim] *= n;
  return s;
}

int64_t coord(int dim, int64_t i, int64_t j, int64_t k) { return dim == 0 ? i : dim == 1 ? j : k; }

const Shape kBlock{2, 3, 5};  // each rank's block; dimensions of different sizes

class Mappings : public ::testing::TestWithParam<int> {
 protected:
  void run(const std::function<void(comm::ProcessGroup&)>& fn) { comm::run_local(GetParam(), fn); }
};

TEST_P(Mappings, CopyToTp) {
  run([](comm::ProcessGroup& g) {
    const float r = static_cast<float>(g.rank()), n = static_cast<float>(g.size());
    Tensor x = Tensor::full(kBlock, r);
    EXPECT_TRUE(
        holds(forward(exec_of(x), Mapping::copy_to_tp, &g, x), kBlock, [&](auto...) { return r; }));
    // backward: all-reduce, Σ_r r = n(n-1)/2 (6 at 4 ranks)
    Tensor dy = Tensor::full(kBlock, r);
    Tensor dx = backward(exec_of(dy), Mapping::copy_to_tp, &g, dy);
    EXPECT_TRUE(holds(dx, kBlock, [&](auto...) { return n * (n - 1) / 2; }));
    EXPECT_TRUE(holds(dy, kBlock, [&](auto...) { return r; }));  // the input is unchanged
  });
}

TEST_P(Mappings, ReduceFromTp) {
  run([](comm::ProcessGroup& g) {
    const float r = static_cast<float>(g.rank()), n = static_cast<float>(g.size());
    Tensor x = make(kBlock, [&](int64_t i, int64_t j, int64_t k) { return r + code(i, j, k); });
    Tensor y = forward(exec_of(x), Mapping::reduce_from_tp, &g, x);
    EXPECT_TRUE(holds(y, kBlock, [&](int64_t i, int64_t j, int64_t k) {
      return n * (n - 1) / 2 + n * code(i, j, k);
    }));
    EXPECT_TRUE(
        holds(x, kBlock, [&](int64_t i, int64_t j, int64_t k) { return r + code(i, j, k); }));
    Tensor dy = Tensor::full(kBlock, r);
    EXPECT_TRUE(holds(backward(exec_of(dy), Mapping::reduce_from_tp, &g, dy), kBlock,
                      [&](auto...) { return r; }));
  });
}

// scatter keeps block r of the split dimension; its backward all-gathers.
void check_scatter(comm::ProcessGroup& g, Mapping m, int dim, int sp_dim) {
  const int64_t n = g.size(), r = g.rank();
  const Shape full = scaled(kBlock, dim, n);
  Tensor x = make(full, code);
  Tensor y = forward(exec_of(x), m, &g, x, sp_dim);
  const int64_t len = kBlock[dim];
  EXPECT_TRUE(holds(y, kBlock, [&](int64_t i, int64_t j, int64_t k) {
    return code(i + (dim == 0 ? r * len : 0), j + (dim == 1 ? r * len : 0),
                k + (dim == 2 ? r * len : 0));
  }));
  Tensor dy = Tensor::full(kBlock, static_cast<float>(r));
  EXPECT_TRUE(
      holds(backward(exec_of(dy), m, &g, dy, sp_dim), full, [&](int64_t i, int64_t j, int64_t k) {
        return static_cast<float>(coord(dim, i, j, k) / len);
      }));
}

// gather puts rank r's block at position r; `dual_sums` says whether the
// backward reduce-scatters (gather_from_sp) or keeps the own block (gather_from_tp).
void check_gather(comm::ProcessGroup& g, Mapping m, int dim, int sp_dim, bool dual_sums) {
  const int64_t n = g.size(), r = g.rank();
  const Shape full = scaled(kBlock, dim, n);
  const int64_t len = kBlock[dim];
  Tensor x = make(kBlock, [&](int64_t i, int64_t j, int64_t k) {
    return static_cast<float>(r) + 1000000.0f * static_cast<float>(coord(dim, i, j, k) == 0);
  });
  EXPECT_TRUE(
      holds(forward(exec_of(x), m, &g, x, sp_dim), full, [&](int64_t i, int64_t j, int64_t k) {
        const int64_t c = coord(dim, i, j, k);
        return static_cast<float>(c / len) + 1000000.0f * static_cast<float>(c % len == 0);
      }));
  // dy on rank q: block b holds q + 100·b (+ the coordinate code).
  Tensor dy = make(full, [&](int64_t i, int64_t j, int64_t k) {
    return static_cast<float>(r + 100 * (coord(dim, i, j, k) / len)) + code(i, j, k);
  });
  const auto own = [&](int64_t i, int64_t j, int64_t k) {
    return code(i + (dim == 0 ? r * len : 0), j + (dim == 1 ? r * len : 0),
                k + (dim == 2 ? r * len : 0));
  };
  Tensor dx = backward(exec_of(dy), m, &g, dy, sp_dim);
  if (dual_sums) {
    // Σ_q (q + 100·r + code) = n(n-1)/2 + n·100·r + n·code
    EXPECT_TRUE(holds(dx, kBlock, [&](int64_t i, int64_t j, int64_t k) {
      return static_cast<float>(n * (n - 1) / 2 + n * 100 * r) +
             static_cast<float>(n) * own(i, j, k);
    }));
  } else {
    EXPECT_TRUE(holds(dx, kBlock, [&](int64_t i, int64_t j, int64_t k) {
      return static_cast<float>(r + 100 * r) + own(i, j, k);
    }));
  }
}

TEST_P(Mappings, ScatterToTpLastDim) {
  run([](comm::ProcessGroup& g) { check_scatter(g, Mapping::scatter_to_tp, 2, 1); });
}

TEST_P(Mappings, GatherFromTpLastDim) {
  run([](comm::ProcessGroup& g) { check_gather(g, Mapping::gather_from_tp, 2, 1, false); });
}

TEST_P(Mappings, ScatterToSp) {
  for (int d : {0, 1}) {
    SCOPED_TRACE("sp dim " + std::to_string(d));
    run([d](comm::ProcessGroup& g) { check_scatter(g, Mapping::scatter_to_sp, d, d); });
  }
}

TEST_P(Mappings, GatherFromSp) {
  for (int d : {0, 1}) {
    SCOPED_TRACE("sp dim " + std::to_string(d));
    run([d](comm::ProcessGroup& g) { check_gather(g, Mapping::gather_from_sp, d, d, true); });
  }
}

TEST_P(Mappings, ReduceScatterToSp) {
  for (int d : {0, 1}) {
    SCOPED_TRACE("sp dim " + std::to_string(d));
    run([d](comm::ProcessGroup& g) {
      const int64_t n = g.size(), r = g.rank(), len = kBlock[d];
      const Shape full = scaled(kBlock, d, n);
      // Rank q's input: block b holds q + 100·b (+ the coordinate code).
      Tensor x = make(full, [&](int64_t i, int64_t j, int64_t k) {
        return static_cast<float>(r + 100 * (coord(d, i, j, k) / len)) + code(i, j, k);
      });
      Tensor y = forward(exec_of(x), Mapping::reduce_scatter_to_sp, &g, x, d);
      EXPECT_TRUE(holds(y, kBlock, [&](int64_t i, int64_t j, int64_t k) {
        const float c = code(i + (d == 0 ? r * len : 0), j + (d == 1 ? r * len : 0), k);
        return static_cast<float>(n * (n - 1) / 2 + n * 100 * r) + static_cast<float>(n) * c;
      }));
      // backward: all-gather, rank r's block at position r
      Tensor dy = Tensor::full(kBlock, static_cast<float>(r));
      EXPECT_TRUE(holds(backward(exec_of(dy), Mapping::reduce_scatter_to_sp, &g, dy, d), full,
                        [&](int64_t i, int64_t j, int64_t k) {
                          return static_cast<float>(coord(d, i, j, k) / len);
                        }));
    });
  }
}

// The building block the mappings use: rank r's block lands at position r
// along dim 0, 1 and the last dimension.
TEST_P(Mappings, AllGatherAlongEveryDimension) {
  for (int d : {0, 1, 2, -1}) {
    SCOPED_TRACE("dim " + std::to_string(d));
    run([d](comm::ProcessGroup& g) {
      const int dim = d < 0 ? 2 : d;
      Tensor x = make(kBlock, [&](int64_t i, int64_t j, int64_t k) {
        return static_cast<float>(g.rank()) * 1000000.0f + code(i, j, k);
      });
      const int64_t len = kBlock[dim];
      EXPECT_TRUE(holds(all_gather_along(exec_of(x), g, x, d), scaled(kBlock, dim, g.size()),
                        [&](int64_t i, int64_t j, int64_t k) {
                          const int64_t c = coord(dim, i, j, k);
                          const int64_t off = c - c % len;
                          return static_cast<float>(c / len) * 1000000.0f +
                                 code(i - (dim == 0 ? off : 0), j - (dim == 1 ? off : 0),
                                      k - (dim == 2 ? off : 0));
                        }));
    });
  }
}

TEST(MappingsWithoutGroup, AreTheIdentity) {
  Tensor x = make(kBlock, code);
  for (Mapping m : {Mapping::copy_to_tp, Mapping::reduce_from_tp, Mapping::scatter_to_tp,
                    Mapping::gather_from_tp, Mapping::scatter_to_sp, Mapping::gather_from_sp,
                    Mapping::reduce_scatter_to_sp}) {
    EXPECT_TRUE(holds(forward(exec_of(x), m, nullptr, x), kBlock, code));
    EXPECT_TRUE(holds(backward(exec_of(x), m, nullptr, x), kBlock, code));
  }
}

// sp_to_tp: this rank's rows (tokens) with every feature -> every rank's rows
// with this rank's block of features, as one all-to-all; the dual all-to-all
// brings every feature of this rank's rows back.
TEST_P(Mappings, SpToTpIsOneAllToAll) {
  run([](comm::ProcessGroup& g) {
    const int64_t n = g.size(), r = g.rank();
    const Shape mine{2, 3, 4 * n};
    Tensor x = make(mine, [&](int64_t i, int64_t j, int64_t k) { return code(r * 2 + i, j, k); });
    g.reset_stats();
    Tensor y = forward(exec_of(x), Mapping::sp_to_tp, &g, x);
    EXPECT_TRUE(holds(y, {2 * n, 3, 4},
                      [&](int64_t i, int64_t j, int64_t k) { return code(i, j, r * 4 + k); }));
    Tensor dx = backward(exec_of(y), Mapping::sp_to_tp, &g, y);
    EXPECT_TRUE(
        holds(dx, mine, [&](int64_t i, int64_t j, int64_t k) { return code(r * 2 + i, j, k); }));
    const comm::CommStats s = g.stats();
    EXPECT_EQ(s.total_calls(), n > 1 ? 2 : 0);
    EXPECT_EQ(s.count(comm::OpKind::all_to_all), n > 1 ? 2 : 0);
  });
}

// The asynchronous row collectives reuse their buffer once the previous
// result is released, and leave a Work to wait on.
TEST_P(Mappings, AsyncRowsReuseTheirBuffer) {
  run([](comm::ProcessGroup& g) {
    const int64_t n = g.size(), r = g.rank();
    Tensor x =
        make({2, 3, 5}, [&](int64_t i, int64_t j, int64_t k) { return code(r * 2 + i, j, k); });
    Tensor buffer;
    const void* first = nullptr;
    for (int step = 0; step < 3; ++step) {
      Pending p = all_gather_rows(ExecContext::host(), &g, x, buffer);
      Tensor all = p.get();
      EXPECT_TRUE(holds(all, {2 * n, 3, 5}, code));
      if (n > 1 && step == 0) first = all.raw();
      if (n > 1) {
        EXPECT_EQ(all.raw(), first);  // the same buffer every step
      }
    }
    Tensor sums;
    Tensor full = make({2 * n, 3, 5}, code);
    Tensor mine = reduce_scatter_rows(ExecContext::host(), &g, full, sums).get();
    EXPECT_TRUE(holds(mine, {2, 3, 5}, [&](int64_t i, int64_t j, int64_t k) {
      return static_cast<float>(n) * code(r * 2 + i, j, k);
    }));
  });
}

TEST(MappingErrors, IndivisibleSplitIsAnError) {
  for (int n : {2, 4}) {
    comm::run_local(n, [](comm::ProcessGroup& g) {
      Tensor x = Tensor::zeros({2, 3, 5});
      EXPECT_THROW(forward(exec_of(x), Mapping::scatter_to_tp, &g, x), Error);
      EXPECT_THROW(forward(exec_of(x), Mapping::scatter_to_sp, &g, x, 1), Error);
      EXPECT_THROW(forward(exec_of(x), Mapping::reduce_scatter_to_sp, &g, x, 1), Error);
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, Mappings, ::testing::Values(1, 2, 4),
                         [](const auto& p) { return "world" + std::to_string(p.param); });

}  // namespace
}  // namespace weft::parallel
