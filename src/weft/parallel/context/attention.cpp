#include "weft/parallel/context/attention.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "weft/core/error.h"

namespace weft::parallel::context {

const char* cp_comm_name(CpComm c) {
  switch (c) {
    case CpComm::p2p: return "p2p";
    case CpComm::allgather: return "allgather";
    case CpComm::a2a: return "a2a";
  }
  return "?";
}

CpComm parse_cp_comm(const std::string& s) {
  if (s == "p2p") return CpComm::p2p;
  if (s == "allgather") return CpComm::allgather;
  if (s == "a2a") return CpComm::a2a;
  WEFT_FAIL("--cp-comm {} is not one of p2p, allgather, a2a", s);
}

void check_heads(CpComm comm, int size, int64_t heads, int64_t kv_heads) {
  if (comm != CpComm::a2a || size <= 1) return;
  WEFT_CHECK(heads % size == 0 && kv_heads % size == 0,
             "--cp-comm a2a splits the attention heads over the --cp {} ranks, but each rank's "
             "{} query heads and {} key/value heads are not both divisible by {}: use --cp-comm "
             "p2p or allgather, or a --cp dividing the (per tensor-parallel rank) head counts",
             size, heads, kv_heads, size);
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The shapes of one call: B sequences, c rows per chunk, H query heads and
// Hkv key/value heads of D, rows batch- or sequence-major.
struct Dims {
  int64_t B, c, H, Hkv, D;
  bool seq_major;
  int64_t es;  // bytes per element

  int64_t q_width() const { return H * D; }
  int64_t kv_width() const { return 2 * Hkv * D; }
  int64_t width() const { return q_width() + kv_width(); }
  int64_t tokens() const { return B * c; }
  // A chunk's tensor of `w` columns: (B, c, w) or (c, B, w).
  Shape chunk_shape(int64_t w) const { return seq_major ? Shape{c, B, w} : Shape{B, c, w}; }
  // The row, in the local (2c-row) tensor, of the n-th row of local chunk i
  // (rows n in a chunk tensor's order).
  int64_t local_row(int i, int64_t n) const {
    if (seq_major) return (i * c + n / B) * B + n % B;
    return (n / c) * 2 * c + i * c + n % c;
  }
};

Dims dims_of(const Tensor& qkv, const kernels::AttentionConfig& cfg, const SequenceChunks& ch) {
  WEFT_CHECK(qkv.device().is_cpu(),
             "context-parallel attention runs on host tensors, got qkv on {} (--device cuda with "
             "--cp above 1 is not supported yet)",
             qkv.device());
  WEFT_CHECK(qkv.dtype() == DType::f32 || qkv.dtype() == DType::bf16,
             "context-parallel attention: qkv f32 or bf16, got {}", dtype_name(qkv.dtype()));
  const int64_t Hkv = cfg.kv_heads ? cfg.kv_heads : cfg.heads;
  WEFT_CHECK(qkv.dim() == 3 && qkv.size(2) % (cfg.heads + 2 * Hkv) == 0,
             "context-parallel attention: qkv (B, T, (H + 2·Hkv)·D), got {}", qkv.shape());
  const int64_t T = cfg.sequence_major ? qkv.size(0) : qkv.size(1);
  WEFT_CHECK(T == ch.local(),
             "context-parallel attention: {} local rows, but the sequence of {} over {} ranks "
             "gives each {}",
             T, ch.sequence, ch.size, ch.local());
  WEFT_CHECK(cfg.sequence == 0, "context-parallel attention takes the whole sequence's config");
  return {cfg.sequence_major ? qkv.size(1) : qkv.size(0),
          ch.chunk(),
          cfg.heads,
          Hkv,
          qkv.size(2) / (cfg.heads + 2 * Hkv),
          cfg.sequence_major,
          qkv.dtype() == DType::f32 ? 4 : 2};
}

char* bytes(const Tensor& t) { return static_cast<char*>(t.raw()); }

// (2, B·c, 2·Hkv·D): the keys and values of the local chunks, in qkv's dtype.
Tensor pack_kv(const Tensor& qkv, const Dims& d) {
  Tensor kv = Tensor::empty({2, d.tokens(), d.kv_width()}, qkv.dtype());
  const int64_t row = d.width() * d.es, col = d.q_width() * d.es, n_bytes = d.kv_width() * d.es;
  for (int i = 0; i < 2; ++i)
    for (int64_t n = 0; n < d.tokens(); ++n)
      std::memcpy(bytes(kv) + (i * d.tokens() + n) * n_bytes,
                  bytes(qkv) + d.local_row(i, n) * row + col, static_cast<size_t>(n_bytes));
  return kv;
}

// The packed tensor of one block: local chunk i's queries, the keys and
// values at kv (B·c rows of 2·Hkv·D).
Tensor block_qkv(const Tensor& qkv, const Dims& d, int i, const char* kv) {
  Tensor x = Tensor::empty(d.chunk_shape(d.width()), qkv.dtype());
  const int64_t row = d.width() * d.es, q_bytes = d.q_width() * d.es,
                kv_bytes = d.kv_width() * d.es;
  for (int64_t n = 0; n < d.tokens(); ++n) {
    std::memcpy(bytes(x) + n * row, bytes(qkv) + d.local_row(i, n) * row,
                static_cast<size_t>(q_bytes));
    std::memcpy(bytes(x) + n * row + q_bytes, kv + n * kv_bytes, static_cast<size_t>(kv_bytes));
  }
  return x;
}

// Local chunk i's rows of a local (2c-row) tensor of `w` columns, in its dtype.
Tensor chunk_of(const Tensor& local, const Dims& d, int i, int64_t w) {
  Tensor x = Tensor::empty(d.chunk_shape(w), local.dtype());
  const int64_t row = w * d.es;
  for (int64_t n = 0; n < d.tokens(); ++n)
    std::memcpy(bytes(x) + n * row, bytes(local) + d.local_row(i, n) * row,
                static_cast<size_t>(row));
  return x;
}

kernels::AttentionConfig block_config(const kernels::AttentionConfig& cfg, const SequenceChunks& ch,
                                      int i, int64_t k) {
  kernels::AttentionConfig b = cfg;
  b.sequence = ch.sequence;
  b.query_position = ch.chunk_index(ch.rank, i) * ch.chunk();
  b.key_position = k * ch.chunk();
  return b;
}

// Merges a block's (out, lse) into chunk accumulators acc (B·c, H·D) f32 and
// lse (B, H, c) f32 (taken as they are when `first`).
void merge(const Dims& d, const Tensor& part, const Tensor& part_lse, Tensor& acc, Tensor& lse,
           bool first) {
  const Tensor p = part.to(DType::f32);
  const float* pv = p.data<float>();
  const float* pl = part_lse.data<float>();
  float* av = acc.data<float>();
  float* al = lse.data<float>();
  if (first) {
    std::memcpy(av, pv, static_cast<size_t>(acc.nbytes()));
    std::memcpy(al, pl, static_cast<size_t>(lse.nbytes()));
    return;
  }
  for (int64_t n = 0; n < d.tokens(); ++n) {
    const int64_t b = d.seq_major ? n % d.B : n / d.c, t = d.seq_major ? n / d.B : n % d.c;
    for (int64_t h = 0; h < d.H; ++h) {
      const int64_t li = (b * d.H + h) * d.c + t;
      const float a = al[li], x = pl[li];
      const float m = std::max(a, x);
      const float wa = std::exp(a - m), wx = std::exp(x - m), sum = wa + wx;
      al[li] = m + std::log(sum);
      float* ar = av + n * d.q_width() + h * d.D;
      const float* pr = pv + n * d.q_width() + h * d.D;
      for (int64_t k = 0; k < d.D; ++k) ar[k] = (ar[k] * wa + pr[k] * wx) / sum;
    }
  }
}

// Points a block's saved state at its chunk's merged output and lse: kept
// probabilities (the short path's) are rescaled by e^(lse_block - lse).
void rebase(kernels::AttentionSaved& s, const Tensor& lse, const Tensor& out) {
  if (s.probs.defined()) {
    const int64_t rows = s.lse.numel(), n = s.probs.numel() / rows;
    float* p = s.probs.data<float>();
    const float* old_lse = s.lse.data<float>();
    const float* new_lse = lse.data<float>();
    for (int64_t r = 0; r < rows; ++r) {
      const float scale = std::exp(old_lse[r] - new_lse[r]);
      for (int64_t j = 0; j < n; ++j) p[r * n + j] *= scale;
    }
  }
  s.lse.copy_from(lse);
  s.out = out;
}

// Adds a block's dX (B·c rows of the packed width) to dq (B·c, H·D) and dkv
// (B·c, 2·Hkv·D), both f32.
void accumulate(const Dims& d, const Tensor& dx, float* dq, float* dkv) {
  const Tensor g = dx.to(DType::f32);
  const float* gv = g.data<float>();
  for (int64_t n = 0; n < d.tokens(); ++n) {
    const float* row = gv + n * d.width();
    float* q = dq + n * d.q_width();
    float* kv = dkv + n * d.kv_width();
    for (int64_t k = 0; k < d.q_width(); ++k) q[k] += row[k];
    for (int64_t k = 0; k < d.kv_width(); ++k) kv[k] += row[d.q_width() + k];
  }
}

// Writes f32 chunk rows (B·c, w) of local chunk i into columns col .. of a
// local tensor `local` of `width` columns, converting to its dtype.
void store_chunk(const Dims& d, const float* src, int64_t w, int i, Tensor& local, int64_t col,
                 int64_t width) {
  for (int64_t n = 0; n < d.tokens(); ++n) {
    const float* s = src + n * w;
    const int64_t at = d.local_row(i, n) * width + col;
    if (local.dtype() == DType::f32) {
      std::memcpy(local.data<float>() + at, s, static_cast<size_t>(w) * sizeof(float));
    } else {
      uint16_t* o = local.bf16_data() + at;
      for (int64_t k = 0; k < w; ++k) o[k] = f32_to_bf16(s[k]);
    }
  }
}

// Runs f(i, j) for the blocks of local query chunk i against key/value chunk
// j (0, 1) of rank `src` that the causal mask does not hide entirely.
template <typename F>
void for_blocks_of(const SequenceChunks& ch, int src, F&& f) {
  for (int j = 0; j < 2; ++j)
    for (int i = 0; i < 2; ++i)
      if (ch.chunk_index(src, j) <= ch.chunk_index(ch.rank, i)) f(i, j);
}

// Times a wait on `w` into times->wait_s.
void timed_wait(const comm::Work& w, AttentionTimes* times) {
  const Clock::time_point t0 = Clock::now();
  w.wait();
  if (times) times->wait_s += seconds_since(t0);
}

void ring_forward(const ExecContext& ec, comm::ProcessGroup& g, CpComm comm,
                  const SequenceChunks& ch, const Dims& d, AttentionSaved& s,
                  kernels::AttentionWorkspace& ws, AttentionTimes* times) {
  const int N = ch.size, r = ch.rank;
  Tensor acc[2];
  bool first[2] = {true, true};
  for (int i = 0; i < 2; ++i) {
    acc[i] = Tensor::empty({d.tokens(), d.q_width()});
    s.lse[i] = Tensor::empty({d.B, d.H, d.c});
  }
  auto blocks = [&](int src, const Tensor& kv) {
    for_blocks_of(ch, src, [&](int i, int j) {
      const int64_t k = ch.chunk_index(src, j);
      const Tensor x = block_qkv(s.qkv, d, i, bytes(kv.narrow(j, 1)));
      const kernels::AttentionConfig cfg = block_config(s.config, ch, i, k);
      Tensor part = Tensor::empty(d.chunk_shape(d.q_width()), s.qkv.dtype());
      AttentionSaved::Block blk{i, k, {}};
      kernels::attention_forward(ec, x, cfg, part, blk.saved, ws);
      merge(d, part, blk.saved.lse, acc[i], s.lse[i], first[i]);
      first[i] = false;
      s.blocks.push_back(std::move(blk));
    });
  };
  const Tensor own = pack_kv(s.qkv, d);
  if (comm == CpComm::allgather && N > 1) {
    Tensor all = Tensor::empty({2 * N, d.tokens(), d.kv_width()}, s.qkv.dtype());
    timed_wait(g.all_gather(all, own), times);
    for (int src = 0; src < N; ++src) blocks(src, all.narrow(2 * src, 2));
  } else {
    Tensor cur = own, next = Tensor::empty(own.shape(), own.dtype());
    for (int step = 0; step < N; ++step) {
      comm::Work w;
      const bool pass = step + 1 < N;
      if (pass) w = g.send_recv(cur, (r + 1) % N, next, (r + N - 1) % N);
      blocks((r + N - step) % N, cur);
      if (pass) {
        timed_wait(w, times);
        std::swap(cur, next);
      }
    }
  }
  for (int i = 0; i < 2; ++i)
    s.out[i] = acc[i].to(s.qkv.dtype()).reshape(d.chunk_shape(d.q_width()));
  for (AttentionSaved::Block& b : s.blocks) rebase(b.saved, s.lse[b.chunk], s.out[b.chunk]);
}

void ring_backward(const ExecContext& ec, comm::ProcessGroup& g, CpComm comm,
                   const SequenceChunks& ch, const Dims& d, const Tensor& dout, AttentionSaved& s,
                   Tensor& dqkv, kernels::AttentionWorkspace& ws, AttentionTimes* times) {
  const int N = ch.size, r = ch.rank;
  const Tensor dout_chunk[2] = {chunk_of(dout, d, 0, d.q_width()),
                                chunk_of(dout, d, 1, d.q_width())};
  Tensor dq = Tensor::zeros({2, d.tokens(), d.q_width()});
  // Runs the blocks against rank src's chunks kv, adding their key/value
  // gradients to dkv (2, B·c, 2·Hkv·D) f32.
  auto blocks = [&](int src, const Tensor& kv, const Tensor& dkv) {
    for (AttentionSaved::Block& b : s.blocks) {
      for (int j = 0; j < 2; ++j) {
        if (b.k != ch.chunk_index(src, j)) continue;
        const Tensor x = block_qkv(s.qkv, d, b.chunk, bytes(kv.narrow(j, 1)));
        const kernels::AttentionConfig cfg = block_config(s.config, ch, b.chunk, b.k);
        Tensor dx = Tensor::empty(x.shape(), x.dtype());
        kernels::attention_backward(ec, dout_chunk[b.chunk], x, b.saved, cfg, dx, ws);
        accumulate(d, dx, dq.data<float>() + b.chunk * d.tokens() * d.q_width(),
                   dkv.data<float>() + j * d.tokens() * d.kv_width());
      }
    }
  };
  const Tensor own = pack_kv(s.qkv, d);
  Tensor dkv_own;
  if (comm == CpComm::allgather && N > 1) {
    Tensor all = Tensor::empty({2 * N, d.tokens(), d.kv_width()}, s.qkv.dtype());
    timed_wait(g.all_gather(all, own), times);
    Tensor dall = Tensor::zeros({2 * N, d.tokens(), d.kv_width()});
    for (int src = 0; src < N; ++src) blocks(src, all.narrow(2 * src, 2), dall.narrow(2 * src, 2));
    dkv_own = Tensor::empty({2, d.tokens(), d.kv_width()});
    timed_wait(g.reduce_scatter(dkv_own, dall), times);
  } else {
    Tensor cur = own, next = Tensor::empty(own.shape(), own.dtype());
    Tensor dcur = Tensor::zeros({2, d.tokens(), d.kv_width()});
    Tensor dnext = Tensor::empty(dcur.shape());
    for (int step = 0; step < N; ++step) {
      comm::Work w;
      const bool pass = step + 1 < N;
      if (pass) w = g.send_recv(cur, (r + 1) % N, next, (r + N - 1) % N);
      blocks((r + N - step) % N, cur, dcur);
      // The gradients follow their keys and values; the N-th hop brings this
      // rank's own home.
      if (N > 1) {
        const comm::Work dw = g.send_recv(dcur, (r + 1) % N, dnext, (r + N - 1) % N);
        timed_wait(dw, times);
        std::swap(dcur, dnext);
      }
      if (pass) {
        timed_wait(w, times);
        std::swap(cur, next);
      }
    }
    dkv_own = dcur;
  }
  for (int i = 0; i < 2; ++i) {
    store_chunk(d, dq.data<float>() + i * d.tokens() * d.q_width(), d.q_width(), i, dqkv, 0,
                d.width());
    store_chunk(d, dkv_own.data<float>() + i * d.tokens() * d.kv_width(), d.kv_width(), i, dqkv,
                d.q_width(), d.width());
  }
}

// Ulysses (a2a). Rank p of N takes key/value heads p·Hkv/N .. (p+1)·Hkv/N - 1
// and the query heads that read them (h = g + m·Hkv, g one of those): its
// local head g' = g - p·Hkv/N and query head m·Hkv/N + g', so that query
// head h' reads key/value head h' mod Hkv/N, the kernel's rule.

// The first column of each head of rank p's packed row (its queries, then
// unless q_only its keys and values), in the order of that row.
std::vector<int64_t> head_columns(const Dims& d, int N, int p, bool q_only) {
  const int64_t Kn = d.Hkv / N;
  std::vector<int64_t> cols;
  for (int64_t m = 0; m < d.H / d.Hkv; ++m)
    for (int64_t g = 0; g < Kn; ++g) cols.push_back((p * Kn + g + m * d.Hkv) * d.D);
  if (q_only) return cols;
  for (int64_t part = 0; part < 2; ++part)
    for (int64_t g = 0; g < Kn; ++g) cols.push_back((d.H + part * d.Hkv + p * Kn + g) * d.D);
  return cols;
}

// Copies the heads at `cols` of a row into consecutive heads, or back.
void gather_heads(const char* row, const std::vector<int64_t>& cols, const Dims& d, char* out) {
  for (size_t h = 0; h < cols.size(); ++h)
    std::memcpy(out + static_cast<int64_t>(h) * d.D * d.es, row + cols[h] * d.es,
                static_cast<size_t>(d.D * d.es));
}
void scatter_heads(const char* in, const std::vector<int64_t>& cols, const Dims& d, char* row) {
  for (size_t h = 0; h < cols.size(); ++h)
    std::memcpy(row + cols[h] * d.es, in + static_cast<int64_t>(h) * d.D * d.es,
                static_cast<size_t>(d.D * d.es));
}

// The row of the n-th row of chunk k (a chunk tensor's order) in a tensor of
// the whole sequence.
int64_t whole_row(const Dims& d, const SequenceChunks& ch, int64_t k, int64_t n) {
  if (d.seq_major) return (k * d.c + n / d.B) * d.B + n % d.B;
  return (n / d.c) * ch.sequence + k * d.c + n % d.c;
}

// Sequence shards -> head shards: local (2c-row) rows of `width` columns,
// each destination's heads at head_columns, exchanged; the result holds the
// whole sequence's rows (in order) of this rank's heads.
Tensor to_heads(comm::ProcessGroup& g, const SequenceChunks& ch, const Dims& d, const Tensor& local,
                int64_t width, bool q_only, AttentionTimes* times) {
  const int N = ch.size;
  const int64_t w = static_cast<int64_t>(head_columns(d, N, 0, q_only).size()) * d.D;
  Tensor send = Tensor::empty({2 * N, d.tokens(), w}, local.dtype());
  for (int p = 0; p < N; ++p) {
    const std::vector<int64_t> cols = head_columns(d, N, p, q_only);
    for (int i = 0; i < 2; ++i)
      for (int64_t n = 0; n < d.tokens(); ++n)
        gather_heads(bytes(local) + d.local_row(i, n) * width * d.es, cols, d,
                     bytes(send) + ((p * 2 + i) * d.tokens() + n) * w * d.es);
  }
  Tensor recv = Tensor::empty(send.shape(), send.dtype());
  timed_wait(g.all_to_all(recv, send), times);
  Tensor whole = Tensor::empty(
      d.seq_major ? Shape{ch.sequence, d.B, w} : Shape{d.B, ch.sequence, w}, local.dtype());
  for (int s = 0; s < N; ++s)
    for (int i = 0; i < 2; ++i)
      for (int64_t n = 0; n < d.tokens(); ++n)
        std::memcpy(bytes(whole) + whole_row(d, ch, ch.chunk_index(s, i), n) * w * d.es,
                    bytes(recv) + ((s * 2 + i) * d.tokens() + n) * w * d.es,
                    static_cast<size_t>(w * d.es));
  return whole;
}

// Head shards -> sequence shards: the inverse of to_heads, into `local`.
void to_sequence(comm::ProcessGroup& g, const SequenceChunks& ch, const Dims& d,
                 const Tensor& whole, Tensor& local, int64_t width, bool q_only,
                 AttentionTimes* times) {
  const int N = ch.size;
  const int64_t w = whole.size(2);
  Tensor send = Tensor::empty({2 * N, d.tokens(), w}, whole.dtype());
  for (int s = 0; s < N; ++s)
    for (int i = 0; i < 2; ++i)
      for (int64_t n = 0; n < d.tokens(); ++n)
        std::memcpy(bytes(send) + ((s * 2 + i) * d.tokens() + n) * w * d.es,
                    bytes(whole) + whole_row(d, ch, ch.chunk_index(s, i), n) * w * d.es,
                    static_cast<size_t>(w * d.es));
  Tensor recv = Tensor::empty(send.shape(), send.dtype());
  timed_wait(g.all_to_all(recv, send), times);
  for (int p = 0; p < N; ++p) {
    const std::vector<int64_t> cols = head_columns(d, N, p, q_only);
    for (int i = 0; i < 2; ++i)
      for (int64_t n = 0; n < d.tokens(); ++n)
        scatter_heads(bytes(recv) + ((p * 2 + i) * d.tokens() + n) * w * d.es, cols, d,
                      bytes(local) + d.local_row(i, n) * width * d.es);
  }
}

kernels::AttentionConfig heads_config(const kernels::AttentionConfig& cfg, const Dims& d, int N) {
  kernels::AttentionConfig h = cfg;
  h.heads = d.H / N;
  h.kv_heads = d.Hkv / N;
  return h;
}

void check_a2a(const kernels::AttentionConfig& cfg, const Dims& d, int N) {
  check_heads(CpComm::a2a, N, d.H, d.Hkv);
  WEFT_CHECK(cfg.dropout == 0.0f,
             "--cp-comm a2a runs attention on head shards, whose dropout masks are not the "
             "whole model's: use --cp-comm p2p or allgather with attention dropout");
}

}  // namespace

void attention_forward(const ExecContext& ec, comm::ProcessGroup& group, CpComm comm,
                       const SequenceChunks& chunks, const Tensor& qkv,
                       const kernels::AttentionConfig& config, Tensor& out, AttentionSaved& saved,
                       kernels::AttentionWorkspace& ws, AttentionTimes* times) {
  const Clock::time_point t0 = Clock::now();
  const Dims d = dims_of(qkv, config, chunks);
  WEFT_CHECK(group.size() == chunks.size && group.rank() == chunks.rank,
             "context-parallel attention: group of {} ranks (rank {}) for chunks of {} (rank {})",
             group.size(), group.rank(), chunks.size, chunks.rank);
  WEFT_CHECK(out.shape() == (d.seq_major ? Shape{2 * d.c, d.B, d.q_width()}
                                         : Shape{d.B, 2 * d.c, d.q_width()}) &&
                 out.dtype() == qkv.dtype(),
             "context-parallel attention output {} {} for qkv {}", dtype_name(out.dtype()),
             out.shape(), qkv.shape());
  saved = AttentionSaved{};
  saved.qkv = qkv;
  saved.config = config;
  if (comm == CpComm::a2a && chunks.size > 1) {
    check_a2a(config, d, chunks.size);
    saved.heads_qkv = to_heads(group, chunks, d, qkv, d.width(), false, times);
    Shape os = saved.heads_qkv.shape();
    os[2] = d.q_width() / chunks.size;
    Tensor heads_out = Tensor::empty(os, qkv.dtype());
    kernels::attention_forward(ec, saved.heads_qkv, heads_config(config, d, chunks.size), heads_out,
                               saved.heads, ws);
    to_sequence(group, chunks, d, heads_out, out, d.q_width(), true, times);
    if (times) times->attention_s += seconds_since(t0);
    return;
  }
  ring_forward(ec, group, comm, chunks, d, saved, ws, times);
  for (int i = 0; i < 2; ++i) {
    const Tensor o = saved.out[i].to(DType::f32);
    store_chunk(d, o.data<float>(), d.q_width(), i, out, 0, d.q_width());
  }
  if (times) times->attention_s += seconds_since(t0);
}

void attention_backward(const ExecContext& ec, comm::ProcessGroup& group, CpComm comm,
                        const SequenceChunks& chunks, const Tensor& dout, AttentionSaved& saved,
                        Tensor& dqkv, kernels::AttentionWorkspace& ws, AttentionTimes* times) {
  const Clock::time_point t0 = Clock::now();
  WEFT_CHECK(saved.qkv.defined(), "context-parallel attention backward without its forward");
  const Dims d = dims_of(saved.qkv, saved.config, chunks);
  WEFT_CHECK(dout.dtype() == saved.qkv.dtype() && dout.numel() == d.tokens() * 2 * d.q_width() &&
                 dqkv.shape() == saved.qkv.shape() && dqkv.dtype() == saved.qkv.dtype(),
             "context-parallel attention backward: dout {} and dqkv {} for qkv {}", dout.shape(),
             dqkv.shape(), saved.qkv.shape());
  if (comm == CpComm::a2a && chunks.size > 1) {
    const Tensor heads_dout = to_heads(group, chunks, d, dout, d.q_width(), true, times);
    Tensor heads_dqkv = Tensor::empty(saved.heads_qkv.shape(), dqkv.dtype());
    kernels::attention_backward(ec, heads_dout, saved.heads_qkv, saved.heads,
                                heads_config(saved.config, d, chunks.size), heads_dqkv, ws);
    to_sequence(group, chunks, d, heads_dqkv, dqkv, d.width(), false, times);
  } else {
    ring_backward(ec, group, comm, chunks, d, dout, saved, dqkv, ws, times);
  }
  if (times) times->attention_s += seconds_since(t0);
}

}  // namespace weft::parallel::context
