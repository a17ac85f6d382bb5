// Context-parallel attention (parallel/context/) against the single-rank
// kernel over the whole sequence: N ranks of the local backend each hold two
// chunks of every sequence; their outputs and qkv gradients must be the
// whole sequence's rows at those positions.
#include <gtest/gtest.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "testing.h"
#include "weft/comm/local.h"
#include "weft/parallel/context/attention.h"

namespace weft::parallel::context {
namespace {

const ExecContext& ec = ExecContext::host();

struct Case {
  int N;
  CpComm comm;
  int64_t B, S, H, Hkv, D;
  bool seq_major;
  float dropout;
};

// The rows of `full` ((B, S, w) or (S, B, w)) at this rank's positions:
// (B, 2c, w) or (2c, B, w).
Tensor local_of(const Tensor& full, const SequenceChunks& ch, bool seq_major) {
  const int64_t B = seq_major ? full.size(1) : full.size(0), w = full.size(2);
  const int64_t T = ch.local(), es = full.dtype() == DType::f32 ? 4 : 2;
  Tensor out = Tensor::empty(seq_major ? Shape{T, B, w} : Shape{B, T, w}, full.dtype());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t p = ch.position(t);
      const int64_t src = seq_major ? p * B + b : b * ch.sequence + p;
      const int64_t dst = seq_major ? t * B + b : b * T + t;
      std::memcpy(static_cast<char*>(out.raw()) + dst * w * es,
                  static_cast<const char*>(full.raw()) + src * w * es, static_cast<size_t>(w * es));
    }
  return out;
}

void check_case(const Case& c) {
  SCOPED_TRACE(::testing::Message()
               << "cp " << c.N << " " << cp_comm_name(c.comm) << " B " << c.B << " S " << c.S
               << " H " << c.H << "/" << c.Hkv << " D " << c.D << (c.seq_major ? " seq" : " batch")
               << " dropout " << c.dropout);
  const int64_t W = (c.H + 2 * c.Hkv) * c.D;
  const Shape qs = c.seq_major ? Shape{c.S, c.B, W} : Shape{c.B, c.S, W};
  const Shape os = c.seq_major ? Shape{c.S, c.B, c.H * c.D} : Shape{c.B, c.S, c.H * c.D};
  const Tensor qkv = weft::testing::random_tensor(qs, 11, -2, 2);
  const Tensor dout = weft::testing::random_tensor(os, 12);
  const kernels::AttentionConfig cfg{.heads = c.H,
                                     .kv_heads = c.Hkv,
                                     .dropout = c.dropout,
                                     .seed = 5,
                                     .offset = 77,
                                     .sequence_major = c.seq_major};
  Tensor out = Tensor::empty(os), dqkv = Tensor::empty(qs);
  kernels::AttentionSaved saved;
  kernels::AttentionWorkspace ws;
  kernels::attention_forward(ec, qkv, cfg, out, saved, ws);
  kernels::attention_backward(ec, dout, qkv, saved, cfg, dqkv, ws);

  std::mutex mu;
  comm::run_local(c.N, [&](comm::ProcessGroup& g) {
    const SequenceChunks ch{c.S, g.size(), g.rank()};
    const Tensor lq = local_of(qkv, ch, c.seq_major), ld = local_of(dout, ch, c.seq_major);
    Tensor lout = Tensor::empty(local_of(out, ch, c.seq_major).shape());
    Tensor ldq = Tensor::empty(lq.shape());
    AttentionSaved s;
    kernels::AttentionWorkspace lws;
    AttentionTimes times;
    attention_forward(ec, g, c.comm, ch, lq, cfg, lout, s, lws, &times);
    attention_backward(ec, g, c.comm, ch, ld, s, ldq, lws, &times);
    const std::lock_guard<std::mutex> lock(mu);
    SCOPED_TRACE(::testing::Message() << "rank " << g.rank());
    EXPECT_TRUE(weft::testing::close(local_of(out, ch, c.seq_major), lout, weft::testing::kF32));
    // Gradients sum O(1) terms over up to S keys, in another order (blocks,
    // then the merge or the ring's sums): f32 error relative to that scale.
    EXPECT_TRUE(
        weft::testing::close(local_of(dqkv, ch, c.seq_major), ldq, weft::testing::kF32, 1.0));
    EXPECT_GE(times.attention_s, times.wait_s);
  });
}

TEST(ContextAttention, RingMatchesWholeSequence) {
  // c = S/(2N): below, at and past the kernels' short path (128 positions).
  for (int N : {1, 2, 4})
    for (bool seq_major : {false, true})
      check_case({N, CpComm::p2p, 2, 64 * N, 4, 2, 8, seq_major, 0.0f});
  check_case({2, CpComm::p2p, 1, 600, 2, 1, 8, false, 0.0f});
}

TEST(ContextAttention, AllGatherMatchesWholeSequence) {
  for (int N : {2, 4})
    for (bool seq_major : {false, true})
      check_case({N, CpComm::allgather, 2, 32 * N, 4, 4, 8, seq_major, 0.0f});
  check_case({2, CpComm::allgather, 1, 520, 2, 2, 8, true, 0.0f});
}

TEST(ContextAttention, UlyssesMatchesWholeSequence) {
  // Heads and key/value heads split over the ranks (grouped: 8 over 4, and
  // multi-head), both layouts, across the kernels' short path.
  for (bool seq_major : {false, true}) {
    check_case({2, CpComm::a2a, 2, 64, 4, 2, 8, seq_major, 0.0f});
    check_case({4, CpComm::a2a, 1, 96, 8, 4, 4, seq_major, 0.0f});
  }
  check_case({2, CpComm::a2a, 1, 256, 2, 2, 8, false, 0.0f});
}

TEST(ContextAttention, UlyssesRefusesDropout) {
  comm::run_local(2, [&](comm::ProcessGroup& g) {
    const SequenceChunks ch{8, 2, g.rank()};
    const Tensor qkv = Tensor::zeros({1, 4, 3 * 8});
    Tensor out = Tensor::empty({1, 4, 8});
    AttentionSaved s;
    kernels::AttentionWorkspace ws;
    const kernels::AttentionConfig cfg{.heads = 2, .dropout = 0.1f};
    EXPECT_THROW(attention_forward(ec, g, CpComm::a2a, ch, qkv, cfg, out, s, ws), Error);
  });
}

TEST(ContextAttention, DropoutDrawsTheWholeSequenceMasks) {
  for (CpComm comm : {CpComm::p2p, CpComm::allgather}) {
    check_case({2, comm, 2, 48, 2, 1, 8, false, 0.2f});
    check_case({4, comm, 1, 400, 2, 2, 4, true, 0.1f});
  }
}

TEST(ContextAttention, RefusesBadShapes) {
  EXPECT_THROW(check_sequence(100, 4), Error);
  EXPECT_NO_THROW(check_sequence(96, 4));
  EXPECT_THROW(check_heads(CpComm::a2a, 4, 8, 2), Error);
  EXPECT_NO_THROW(check_heads(CpComm::p2p, 4, 8, 2));
  EXPECT_THROW(parse_cp_comm("ring"), Error);
}

TEST(ContextChunks, PositionsAndLocalRows) {
  const SequenceChunks ch{16, 2, 1};  // chunks of 4: rank 1 holds chunks 1 and 2
  std::vector<int64_t> pos;
  for (int64_t t = 0; t < ch.local(); ++t) pos.push_back(ch.position(t));
  EXPECT_EQ(pos, (std::vector<int64_t>{4, 5, 6, 7, 8, 9, 10, 11}));
  const SequenceChunks r0{16, 2, 0};
  EXPECT_EQ(r0.position(4), 12);
  EXPECT_EQ(r0.owner(3), 0);
  EXPECT_EQ(r0.local_index(3), 1);
  std::vector<int32_t> ids(2 * 16);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  const Tensor cols = local_columns(ec, Tensor::from_i32({2, 16}, ids), r0);
  const int32_t* v = cols.data<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(v, v + 16),
            (std::vector<int32_t>{0, 1, 2, 3, 12, 13, 14, 15, 16, 17, 18, 19, 28, 29, 30, 31}));
  std::vector<float> table(16 * 2);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i);
  const Tensor rows = local_rows(Tensor::from({16, 2}, table), ch);
  EXPECT_EQ(rows.item(0), 8.0f);    // position 4, column 0
  EXPECT_EQ(rows.item(15), 23.0f);  // position 11, column 1
  Tensor grad = Tensor::zeros({16, 2});
  add_local_rows(Tensor::full({8, 2}, 1.0f), grad, ch);
  EXPECT_EQ(grad.item(7), 0.0f);
  EXPECT_EQ(grad.item(8), 1.0f);
  EXPECT_EQ(grad.item(23), 1.0f);
  EXPECT_EQ(grad.item(24), 0.0f);
}

}  // namespace
}  // namespace weft::parallel::context
