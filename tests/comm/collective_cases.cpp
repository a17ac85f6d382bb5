#include "collective_cases.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "weft/comm/grid.h"
#include "weft/core/error.h"
#include "weft/core/exec_context.h"

namespace weft::comm::testing {

namespace {

// A value that every dtype under test holds exactly (small integers).
float value(int rank, int64_t i) { return static_cast<float>((rank + 1) + (i % 7)); }

Tensor filled(const Shape& shape, DType dtype, int rank) {
  std::vector<float> v(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = value(rank, static_cast<int64_t>(i));
  if (dtype == DType::i32) {
    std::vector<int32_t> iv(v.begin(), v.end());
    return Tensor::from_i32(shape, iv);
  }
  return Tensor::from(shape, v, dtype);
}

// The expected reduction of value(p, i) over p in [0, n), in f32 in rank order.
float reduced(ReduceOp op, int n, int64_t i, DType dtype) {
  float acc = value(0, i);
  for (int p = 1; p < n; ++p)
    acc = op == ReduceOp::max ? std::max(acc, value(p, i)) : acc + value(p, i);
  if (op == ReduceOp::avg) acc /= static_cast<float>(n);
  return dtype == DType::bf16 ? round_to_bf16(acc) : acc;
}

void expect_values(const Tensor& t, const std::vector<float>& want, const std::string& what) {
  std::vector<float> got = t.to_vector();
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t wrong = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i] && !(std::isnan(got[i]) && std::isnan(want[i]))) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++wrong;
    }
  }
  EXPECT_EQ(wrong, 0) << what << ": first mismatch at " << first << ": got "
                      << (first >= 0 ? got[static_cast<size_t>(first)] : 0.0f) << ", want "
                      << (first >= 0 ? want[static_cast<size_t>(first)] : 0.0f);
}

std::string tag(ProcessGroup& g, const std::string& what) {
  return format("{} (rank {} of {})", what, g.rank(), g.size());
}

void all_gather(ProcessGroup& g) {
  const int n = g.size(), me = g.rank();
  for (DType dtype : {DType::f32, DType::bf16, DType::i32, DType::u8}) {
    for (bool in_place : {false, true}) {
      const Shape chunk_shape{3, 5};
      Tensor out = Tensor::zeros({3 * n, 5}, dtype);
      Tensor in = in_place ? out.chunk(n)[static_cast<size_t>(me)] : filled(chunk_shape, dtype, me);
      if (in_place) in.copy_from(filled(chunk_shape, dtype, me));
      g.all_gather(out, in).wait();
      std::vector<float> want;
      for (int p = 0; p < n; ++p)
        for (int64_t i = 0; i < 15; ++i) want.push_back(value(p, i));
      expect_values(out, want,
                    tag(g, format("all_gather {} {}", dtype_name(dtype), in_place ? "in" : "out")));
    }
  }
}

void reduce_scatter(ProcessGroup& g) {
  const int n = g.size(), me = g.rank();
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
      for (bool in_place : {false, true}) {
        const int64_t rows = 4, cols = 3, count = rows * cols;
        Tensor in = filled({rows * n, cols}, dtype, me);
        Tensor out =
            in_place ? in.chunk(n)[static_cast<size_t>(me)] : Tensor::zeros({rows, cols}, dtype);
        g.reduce_scatter(out, in, op).wait();
        std::vector<float> want;
        for (int64_t i = 0; i < count; ++i) want.push_back(reduced(op, n, me * count + i, dtype));
        expect_values(out, want,
                      tag(g, format("reduce_scatter {} {} {}", dtype_name(dtype),
                                    reduce_op_name(op), in_place ? "in" : "out")));
      }
    }
  }
}

void all_reduce(ProcessGroup& g) {
  const int n = g.size(), me = g.rank();
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
      for (int64_t count : {int64_t{1}, int64_t{7}, int64_t{1000}}) {
        for (bool in_place : {false, true}) {
          Tensor in = filled({count}, dtype, me);
          Tensor out = in_place ? in : Tensor::zeros({count}, dtype);
          g.all_reduce(out, in, op).wait();
          std::vector<float> want;
          for (int64_t i = 0; i < count; ++i) want.push_back(reduced(op, n, i, dtype));
          expect_values(out, want,
                        tag(g, format("all_reduce {} {} count {} {}", dtype_name(dtype),
                                      reduce_op_name(op), count, in_place ? "in" : "out")));
        }
      }
    }
  }
}

// bf16 sums accumulate in f32: 1 + k * 2^-9 rounded once is not what a bf16
// running sum gives (each 2^-9 is lost against 1).
void bf16_accumulates_in_f32(ProcessGroup& g) {
  const int n = g.size();
  Tensor t = Tensor::full({16}, g.rank() == 0 ? 1.0f : std::ldexp(1.0f, -9), DType::bf16);
  g.all_reduce(t).wait();
  const float want = round_to_bf16(1.0f + static_cast<float>(n - 1) * std::ldexp(1.0f, -9));
  expect_values(t, std::vector<float>(16, want), tag(g, "bf16 all_reduce"));
}

void broadcast(ProcessGroup& g) {
  const int n = g.size(), me = g.rank();
  for (int root = 0; root < n; ++root) {
    for (DType dtype : {DType::f32, DType::bf16, DType::u8}) {
      Tensor t = me == root ? filled({5, 2}, dtype, root) : Tensor::zeros({5, 2}, dtype);
      g.broadcast(t, root).wait();
      std::vector<float> want;
      for (int64_t i = 0; i < 10; ++i) want.push_back(value(root, i));
      expect_values(t, want,
                    tag(g, format("broadcast in place root {} {}", root, dtype_name(dtype))));
      Tensor in = filled({5, 2}, dtype, me), out = Tensor::zeros({5, 2}, dtype);
      g.broadcast(out, in, root).wait();
      expect_values(out, want, tag(g, format("broadcast root {} {}", root, dtype_name(dtype))));
    }
  }
}

void all_to_all(ProcessGroup& g) {
  const int n = g.size(), me = g.rank();
  for (bool in_place : {false, true}) {
    // Element j of chunk p on rank q is 100 * q + 10 * p + j.
    std::vector<float> v;
    for (int p = 0; p < n; ++p)
      for (int j = 0; j < 6; ++j) v.push_back(static_cast<float>(100 * me + 10 * p + j));
    Tensor in = Tensor::from({2 * n, 3}, v);
    Tensor out = in_place ? in : Tensor::zeros({2 * n, 3});
    g.all_to_all(out, in).wait();
    std::vector<float> want;
    for (int p = 0; p < n; ++p)
      for (int j = 0; j < 6; ++j) want.push_back(static_cast<float>(100 * p + 10 * me + j));
    expect_values(out, want, tag(g, format("all_to_all {}", in_place ? "in" : "out")));
  }
}

// Rank q sends (q + p) % 3 rows of 2 values to rank p: some chunks are empty.
void all_to_all_v(ProcessGroup& g) {
  const int n = g.size(), me = g.rank();
  const auto rows = [](int from, int to) { return static_cast<int64_t>((from + to) % 3); };
  std::vector<int64_t> in_rows, out_rows;
  std::vector<float> v, want;
  for (int p = 0; p < n; ++p) {
    in_rows.push_back(rows(me, p));
    out_rows.push_back(rows(p, me));
    for (int64_t r = 0; r < rows(me, p); ++r)
      for (int j = 0; j < 2; ++j) v.push_back(static_cast<float>(1000 * me + 100 * p + 10 * r + j));
    for (int64_t r = 0; r < rows(p, me); ++r)
      for (int j = 0; j < 2; ++j)
        want.push_back(static_cast<float>(1000 * p + 100 * me + 10 * r + j));
  }
  const auto total = [](const std::vector<int64_t>& c) {
    int64_t s = 0;
    for (int64_t x : c) s += x;
    return s;
  };
  Tensor in = Tensor::from({total(in_rows), 2}, v);
  Tensor out = Tensor::full({total(out_rows), 2}, -1.0f);
  g.all_to_all(out, in, out_rows, in_rows).wait();
  expect_values(out, want, tag(g, "all_to_all with variable chunks"));
  // Arguments are checked on the calling rank, before anything is exchanged.
  std::vector<int64_t> bad = in_rows;
  bad[0] += 1;
  EXPECT_THROW(g.all_to_all(out, in, out_rows, bad), Error);
  bad = in_rows;
  bad.push_back(0);
  EXPECT_THROW(g.all_to_all(out, in, out_rows, bad), Error);
}

void point_to_point(ProcessGroup& g) {
  const int n = g.size(), me = g.rank();
  // A ring: everybody sends to the right and receives from the left at once.
  Tensor send = filled({64}, DType::f32, me), recv = Tensor::zeros({64});
  g.send_recv(send, (me + 1) % n, recv, (me + n - 1) % n).wait();
  std::vector<float> want;
  for (int64_t i = 0; i < 64; ++i) want.push_back(value((me + n - 1) % n, i));
  expect_values(recv, want, tag(g, "send_recv ring"));
  // Pairs: even ranks send twice, odd ranks receive twice (in order).
  if (me % 2 == 0 && me + 1 < n) {
    Work a = g.send(filled({8}, DType::bf16, me), me + 1);
    Work b = g.send(filled({8}, DType::bf16, me + 50), me + 1);
    a.wait();
    b.wait();
  } else if (me % 2 == 1) {
    Tensor first = Tensor::zeros({8}, DType::bf16), second = Tensor::zeros({8}, DType::bf16);
    Work a = g.recv(first, me - 1);
    Work b = g.recv(second, me - 1);
    b.wait();
    EXPECT_TRUE(a.is_completed());
    std::vector<float> w1, w2;
    for (int64_t i = 0; i < 8; ++i) {
      w1.push_back(value(me - 1, i));
      w2.push_back(value(me + 49, i));
    }
    expect_values(first, w1, tag(g, "recv 1"));
    expect_values(second, w2, tag(g, "recv 2"));
  }
  g.barrier().wait();
}

// Chunks past 4 MiB take the streaming paths of the local backend (all_gather
// pushes each chunk to every rank; reductions combine in registers and stream
// out); an odd count puts chunk edges off the 64-byte boundaries.
void large_messages(ProcessGroup& g) {
  const int n = g.size(), me = g.rank();
  const int64_t count = (int64_t{4} << 20) / 4 + 3;  // f32 per rank
  Tensor in = filled({count}, DType::f32, me);
  std::vector<float> gathered;
  for (int p = 0; p < n; ++p) {
    for (int64_t i = 0; i < count; ++i) gathered.push_back(value(p, i));
  }
  Tensor out = Tensor::zeros({count * n});
  g.all_gather(out, in).wait();
  expect_values(out, gathered, tag(g, "all_gather 4 MiB"));
  Tensor big = Tensor::zeros({count * n});
  big.chunk(n)[static_cast<size_t>(me)].copy_from(in);
  g.all_gather(big, big.chunk(n)[static_cast<size_t>(me)]).wait();
  expect_values(big, gathered, tag(g, "in-place all_gather 4 MiB"));

  // Rank p's input: value(p, i) over the whole tensor; every chunk of at
  // least 4 MiB in either dtype.
  for (DType dtype : {DType::f32, DType::bf16}) {
    const int64_t chunk = (int64_t{4} << 20) / (dtype_bits(dtype) / 8) + 3;
    const Tensor original = filled({chunk * n}, dtype, me);
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
      const std::string what =
          format("{} reduce_scatter ({}) 4 MiB", dtype_name(dtype), reduce_op_name(op));
      Tensor input = original.clone();
      std::vector<float> want;
      for (int64_t i = 0; i < chunk; ++i) want.push_back(reduced(op, n, me * chunk + i, dtype));
      Tensor rs = Tensor::zeros({chunk}, dtype);
      g.reduce_scatter(rs, input, op).wait();
      expect_values(rs, want, tag(g, what));
      g.reduce_scatter(input.chunk(n)[static_cast<size_t>(me)], input, op).wait();
      expect_values(input.chunk(n)[static_cast<size_t>(me)], want, tag(g, "in-place " + what));
    }
    // all_reduce: each rank reduces one part of at least 4 MiB, starting at an
    // odd element, and copies the others' parts from their outputs (f32 only:
    // the bf16 arithmetic is the reduce_scatter's above).
    if (dtype != DType::f32) continue;
    std::vector<float> want;
    for (int64_t i = 0; i < chunk * n; ++i) want.push_back(reduced(ReduceOp::sum, n, i, dtype));
    Tensor ar = Tensor::zeros({chunk * n}, dtype);
    g.all_reduce(ar, original).wait();
    expect_values(ar, want, tag(g, format("{} all_reduce 4 MiB", dtype_name(dtype))));
    Tensor ar_in_place = original.clone();
    g.all_reduce(ar_in_place).wait();
    expect_values(ar_in_place, want,
                  tag(g, format("in-place {} all_reduce 4 MiB", dtype_name(dtype))));
  }
}

// Many operations in flight at once complete in issue order with the right data.
void issue_order(ProcessGroup& g) {
  const int n = g.size(), me = g.rank();
  std::vector<Tensor> tensors;
  std::vector<Work> works;
  for (int k = 0; k < 20; ++k) {
    tensors.push_back(Tensor::full({33}, static_cast<float>(k + me)));
    works.push_back(g.all_reduce(tensors.back()));
    if (k % 5 == 4) works.push_back(g.barrier());
  }
  works.back().wait();
  for (const Work& w : works) EXPECT_TRUE(w.is_completed()) << tag(g, w.what());
  for (int k = 0; k < 20; ++k) {
    const float want = static_cast<float>(n * k + n * (n - 1) / 2);
    expect_values(tensors[static_cast<size_t>(k)], std::vector<float>(33, want),
                  tag(g, format("all_reduce {} of 20", k)));
  }
}

// An issued operation completes without anybody waiting for it.
void progresses_without_wait(ProcessGroup& g) {
  Tensor t = Tensor::full({4096}, 1.0f);
  Work w = g.all_reduce(t);
  for (int i = 0; i < 20000 && !w.is_completed(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(w.is_completed()) << tag(g, "all_reduce did not progress on its own");
  w.wait();
  EXPECT_EQ(t.item(0), static_cast<float>(g.size()));
}

void subgroups(ProcessGroup& g) {
  const int n = g.size(), me = g.rank();
  std::vector<std::vector<int>> lists(2);
  for (int r = 0; r < n; ++r) lists[static_cast<size_t>(r % 2)].push_back(r);
  if (lists[1].empty()) lists.pop_back();
  auto sub = g.new_subgroups_by_enumeration(lists, "parity");
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->rank(), me / 2);
  EXPECT_EQ(sub->size(), static_cast<int>(lists[static_cast<size_t>(me % 2)].size()));
  EXPECT_EQ(sub->world_ranks(), lists[static_cast<size_t>(me % 2)]);
  Tensor t = Tensor::full({3}, static_cast<float>(me));
  sub->all_reduce(t).wait();
  float want = 0;
  for (int r : lists[static_cast<size_t>(me % 2)]) want += static_cast<float>(r);
  expect_values(t, std::vector<float>(3, want), tag(g, "all_reduce in the parity group"));
  // A rank that no list names gets no group.
  std::vector<std::vector<int>> only_first = {{0}};
  auto first = g.new_subgroups_by_enumeration(only_first, "first");
  EXPECT_EQ(static_cast<bool>(first), me == 0);
  // The world still works after the split, interleaved with the sub-group.
  Tensor w = Tensor::full({2}, 1.0f);
  Work a = g.all_reduce(w);
  Work b = sub->barrier();
  a.wait();
  b.wait();
  EXPECT_EQ(w.item(1), static_cast<float>(n));
}

void grid(ProcessGroup& g) {
  const int n = g.size();
  Grid grid(g, "tp-dp", {{"tp", 2}});
  EXPECT_EQ(grid.size("dp"), n / 2);
  EXPECT_EQ(grid.rank_in("tp"), g.rank() % 2);
  EXPECT_EQ(grid.rank_in("dp"), g.rank() / 2);
  EXPECT_EQ(grid.group("tp").world_ranks(), grid.layout().group_of("tp", g.rank()));
  Tensor t = Tensor::full({1}, static_cast<float>(g.rank()));
  grid.group("tp").all_reduce(t).wait();
  const int base = g.rank() - g.rank() % 2;
  EXPECT_EQ(t.item(0), static_cast<float>(2 * base + 1)) << tag(g, "tp all_reduce");
  Tensor d = Tensor::full({1}, 1.0f);
  grid.group("dp").all_reduce(d).wait();
  EXPECT_EQ(d.item(0), static_cast<float>(n / 2)) << tag(g, "dp all_reduce");
}

// Arguments that disagree between ranks fail on every rank, on a throwaway group.
void mismatch_between_ranks(ProcessGroup& g) {
  const int n = g.size(), me = g.rank();
  std::vector<int> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  auto sizes = g.new_subgroups_by_enumeration({all}, "mismatch");
  Tensor t = Tensor::zeros({me == 0 ? 8 : 4});
  try {
    sizes->all_reduce(t).wait();
    ADD_FAILURE() << tag(g, "all_reduce of different sizes did not fail");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("disagree"), std::string::npos) << e.what();
  }
  auto roots = g.new_subgroups_by_enumeration({all}, "roots");
  Tensor b = Tensor::zeros({4});
  try {
    roots->broadcast(b, me == 1 ? 1 : 0).wait();
    ADD_FAILURE() << tag(g, "broadcast with different roots did not fail");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("root"), std::string::npos) << e.what();
  }
  // A receive of the wrong size fails on the receiver; the sender completes.
  if (me == 0) {
    g.send(Tensor::zeros({4}), 1).wait();
  } else if (me == 1) {
    Tensor r = Tensor::zeros({8});
    EXPECT_THROW(g.recv(r, 0).wait(), Error);
  }
  g.barrier().wait();
}

void stats(ProcessGroup& g) {
  const int n = g.size();
  std::vector<int> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  auto sub = g.new_subgroups_by_enumeration({all}, "stats");
  Tensor t = Tensor::zeros({10});
  Tensor out = Tensor::zeros({10 * n});
  sub->all_reduce(t).wait();
  sub->all_reduce(t).wait();
  sub->all_gather(out, t).wait();
  CommStats s = sub->stats();
  EXPECT_EQ(s.count(OpKind::all_reduce), 2);
  EXPECT_EQ(s.bytes_of(OpKind::all_reduce), 80);
  EXPECT_EQ(s.count(OpKind::all_gather), 1);
  EXPECT_EQ(s.bytes_of(OpKind::all_gather), 40 * n);
  EXPECT_EQ(s.total_calls(), 3);
  sub->reset_stats();
  EXPECT_EQ(sub->stats().total_calls(), 0);
}

// f64 and i64 reduce in their own type: values that f32 (and, for i64, f64)
// cannot hold come back exact; an i64 average truncates toward zero.
void wide_reductions(ProcessGroup& g) {
  const int n = g.size(), me = g.rank();
  const int64_t rows = 3, count = rows * n;
  const auto i64_value = [](int rank, int64_t i) {
    return (i % 2 ? -1 : 1) * ((int64_t{1} << 56) + 3 * rank + i);
  };
  const auto f64_value = [](int rank, int64_t i) { return 1.0 + std::ldexp(3.0 * rank + i, -40); };
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
    const std::string name(reduce_op_name(op));
    Tensor a = Tensor::empty({count}, DType::i64), b = Tensor::empty({count}, DType::f64);
    for (int64_t i = 0; i < count; ++i) {
      a.data<int64_t>()[i] = i64_value(me, i);
      b.data<double>()[i] = f64_value(me, i);
    }
    std::vector<int64_t> want_i(static_cast<size_t>(count));
    std::vector<double> want_f(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      int64_t si = i64_value(0, i), mi = si;
      double sf = f64_value(0, i), mf = sf;
      for (int p = 1; p < n; ++p) {
        si += i64_value(p, i);
        mi = std::max(mi, i64_value(p, i));
        sf += f64_value(p, i);
        mf = std::max(mf, f64_value(p, i));
      }
      want_i[static_cast<size_t>(i)] = op == ReduceOp::max ? mi : op == ReduceOp::sum ? si : si / n;
      want_f[static_cast<size_t>(i)] = op == ReduceOp::max ? mf : op == ReduceOp::sum ? sf : sf / n;
    }
    // reduce_scatter first (from the inputs), then all_reduce in place.
    Tensor rs_i = Tensor::empty({rows}, DType::i64), rs_f = Tensor::empty({rows}, DType::f64);
    g.reduce_scatter(rs_i, a, op).wait();
    g.reduce_scatter(rs_f, b, op).wait();
    for (int64_t i = 0; i < rows; ++i) {
      const size_t at = static_cast<size_t>(me * rows + i);
      EXPECT_EQ(rs_i.data<int64_t>()[i], want_i[at]) << tag(g, "i64 reduce_scatter " + name);
      EXPECT_EQ(rs_f.data<double>()[i], want_f[at]) << tag(g, "f64 reduce_scatter " + name);
    }
    g.all_reduce(a, op).wait();
    g.all_reduce(b, op).wait();
    for (int64_t i = 0; i < count; ++i) {
      EXPECT_EQ(a.data<int64_t>()[i], want_i[static_cast<size_t>(i)])
          << tag(g, format("i64 all_reduce {} at {}", name, i));
      EXPECT_EQ(b.data<double>()[i], want_f[static_cast<size_t>(i)])
          << tag(g, format("f64 all_reduce {} at {}", name, i));
    }
  }
}

// One operation for several tensors gives what the single calls give, counts
// as one call, and orders with the other operations of the group.
void coalesced(ProcessGroup& g) {
  const int n = g.size(), me = g.rank();
  std::vector<int> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  auto sub = g.new_subgroups_by_enumeration({all}, "coalesced");
  const std::vector<Shape> shapes = {Shape{2 * n, 3}, Shape{n}, Shape{0}, Shape{5 * n, 1}};
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
      const std::string what = format("{} {}", dtype_name(dtype), reduce_op_name(op));
      // all_reduce: each tensor as if reduced alone.
      std::vector<Tensor> ts;
      for (const Shape& s : shapes) ts.push_back(filled(s, dtype, me));
      sub->reset_stats();
      Work w = sub->all_reduce_coalesced(ts, op);
      EXPECT_EQ(sub->stats().count(OpKind::all_reduce), 1);
      EXPECT_NE(w.what().find("all_reduce_coalesced"), std::string::npos) << w.what();
      w.wait();
      for (size_t k = 0; k < ts.size(); ++k) {
        std::vector<float> want;
        for (int64_t i = 0; i < ts[k].numel(); ++i) want.push_back(reduced(op, n, i, dtype));
        expect_values(ts[k], want, tag(g, format("all_reduce_coalesced {} tensor {}", what, k)));
      }
      // reduce_scatter, the last one in place.
      std::vector<Tensor> ins, outs;
      for (const Shape& s : shapes) {
        ins.push_back(filled(s, dtype, me));
        Shape o = s;
        o[0] /= n;
        outs.push_back(Tensor::zeros(o, dtype));
      }
      outs.back() = ins.back().chunk(n)[static_cast<size_t>(me)];
      sub->reduce_scatter_coalesced(outs, ins, op).wait();
      for (size_t k = 0; k < outs.size(); ++k) {
        const int64_t c = outs[k].numel();
        std::vector<float> want;
        for (int64_t i = 0; i < c; ++i) want.push_back(reduced(op, n, me * c + i, dtype));
        expect_values(outs[k], want,
                      tag(g, format("reduce_scatter_coalesced {} tensor {}", what, k)));
      }
    }
    // all_gather, the first one in place.
    std::vector<Tensor> ins, outs;
    for (const Shape& s : shapes) {
      Shape o = s;
      o[0] /= n;
      ins.push_back(filled(o, dtype, me));
      outs.push_back(Tensor::zeros(s, dtype));
    }
    Tensor own = outs.front().chunk(n)[static_cast<size_t>(me)];
    own.copy_from(ins.front());
    ins.front() = own;
    sub->all_gather_coalesced(outs, ins).wait();
    for (size_t k = 0; k < outs.size(); ++k) {
      const int64_t c = outs[k].numel() / n;
      std::vector<float> want;
      for (int p = 0; p < n; ++p)
        for (int64_t i = 0; i < c; ++i) want.push_back(value(p, i));
      expect_values(outs[k], want,
                    tag(g, format("all_gather_coalesced {} tensor {}", dtype_name(dtype), k)));
    }
  }
  // f64 and i64 coalesce too.
  Tensor d = Tensor::full({3}, 0.5f, DType::f64), l = Tensor::full({2}, 2.0f, DType::i64);
  sub->all_reduce_coalesced(std::vector<Tensor>{d}).wait();
  sub->all_reduce_coalesced(std::vector<Tensor>{l}).wait();
  EXPECT_EQ(d.data<double>()[2], 0.5 * n);
  EXPECT_EQ(l.data<int64_t>()[1], 2 * n);
  // Nothing to do: a completed Work, no operation.
  sub->reset_stats();
  EXPECT_TRUE(sub->all_reduce_coalesced({}).is_completed());
  EXPECT_EQ(sub->stats().total_calls(), 0);
  // One dtype per call, checked on the caller.
  std::vector<Tensor> mixed = {Tensor::zeros({2}), Tensor::zeros({2}, DType::bf16)};
  EXPECT_THROW(sub->all_reduce_coalesced(mixed), Error);
  sub->barrier().wait();
}

// Work::wait(context) orders a context after the operation: on the CPU a host wait.
void wait_on_context(ProcessGroup& g) {
  Tensor t = Tensor::full({5}, 1.0f);
  Work w = g.all_reduce(t);
  w.wait(ExecContext::host());
  EXPECT_TRUE(w.is_completed());
  EXPECT_EQ(t.item(4), static_cast<float>(g.size()));
  Work().wait(ExecContext::host());
}

}  // namespace

const std::vector<CommCase>& collective_cases() {
  static const std::vector<CommCase> cases = {
      {"all_gather", all_gather},
      {"reduce_scatter", reduce_scatter},
      {"all_reduce", all_reduce},
      {"bf16_accumulates_in_f32", bf16_accumulates_in_f32},
      {"broadcast", broadcast},
      {"all_to_all", all_to_all},
      {"all_to_all_v", all_to_all_v},
      {"point_to_point", point_to_point, {.min_world = 2}},
      {"large_messages", large_messages},
      {"issue_order", issue_order},
      {"progresses_without_wait", progresses_without_wait},
      {"subgroups", subgroups},
      {"grid", grid, {.min_world = 2, .multiple_of = 2}},
      {"mismatch_between_ranks", mismatch_between_ranks, {.min_world = 2}},
      {"stats", stats},
      {"wide_reductions", wide_reductions},
      {"coalesced", coalesced},
      {"wait_on_context", wait_on_context},
  };
  return cases;
}

}  // namespace weft::comm::testing
