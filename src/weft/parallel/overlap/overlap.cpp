#include "weft/parallel/overlap/overlap.h"

#include <algorithm>
#include <vector>

#include "weft/kernels/activation.h"

namespace weft::parallel::overlap {

namespace {

// Rows [start, start + count) of a row-block tensor (dimension 0).
Tensor rows_of(const Tensor& t, int64_t start, int64_t count) { return t.narrow(start, count); }

Shape with_rows(Shape s, int64_t rows) {
  s[0] = rows;
  return s;
}

}  // namespace

ExecContext beside_comm(const ExecContext& ec, int comm_cores) {
  // The cores are CPU cores: a GPU context keeps its stream and its kernels.
  if (comm_cores <= 0 || ec.device().is_cuda()) return ec;
  return ec.with_threads(std::max(1, ec.threads() - comm_cores));
}

void ring_all_gather_gemm(const ExecContext& ec, comm::ProcessGroup& g, const Tensor& a,
                          const Tensor& b, const Tensor& out, const kernels::GemmOptions& opt,
                          const Tensor& gathered) {
  const int p = g.size(), r = g.rank();
  const int64_t n = a.size(0);
  WEFT_CHECK(gathered.size(0) == p * n && out.size(0) == p * n,
             "ring all-gather GEMM: {} rows per rank need ({} x ...) buffers, got {} and {}", n,
             p * n, gathered.shape(), out.shape());
  rows_of(gathered, r * n, n).copy_from(a);
  for (int i = 0; i < p; ++i) {
    const int have = (r - i + p) % p;          // the block present at this step
    const int next = (r - i - 1 + 2 * p) % p;  // the block arriving for the next one
    comm::Work exchange;
    if (i + 1 < p) {
      exchange = g.send_recv(rows_of(gathered, have * n, n), (r + 1) % p,
                             rows_of(gathered, next * n, n), (r - 1 + p) % p);
    }
    Tensor c = rows_of(out, have * n, n);
    kernels::gemm(ec, rows_of(gathered, have * n, n), b, c, opt);
    exchange.wait(ec);
  }
}

void ring_gemm_reduce_scatter(const ExecContext& ec, comm::ProcessGroup& g, const Tensor& a,
                              const Tensor& b, const Tensor& out, const kernels::GemmOptions& opt,
                              GemmWorkspace& ws) {
  const int p = g.size(), r = g.rank();
  WEFT_CHECK(a.size(0) % p == 0 && out.size(0) == a.size(0) / p,
             "ring GEMM reduce-scatter: {} rows do not make {} blocks of {}", a.size(0), p,
             out.size(0));
  WEFT_CHECK(!opt.accumulate && opt.bias == nullptr,
             "ring GEMM reduce-scatter: the bias is added after the reduction, and the output "
             "cannot accumulate");
  const int64_t n = out.size(0);
  // Two accumulators that alternate (one travels while the next is computed)
  // and the receive buffer, in one workspace buffer.
  Tensor bufs = ec.reuse(ws.partial, with_rows(out.shape(), 3 * n), out.dtype(), MemoryTag::comm);
  const Tensor acc[2] = {rows_of(bufs, 0, n), rows_of(bufs, n, n)};
  const Tensor incoming = rows_of(bufs, 2 * n, n);
  comm::Work exchange;
  for (int i = 0; i < p; ++i) {
    const int block = (r - 1 - i + 2 * p) % p;
    Tensor dst = i + 1 == p ? out : acc[i % 2];
    kernels::gemm(ec, rows_of(a, block * n, n), b, dst, opt);
    if (i > 0) {
      exchange.wait(ec);  // the partial of this block from the previous rank
      kernels::axpy(ec, 1.0f, incoming, dst);
    }
    if (i + 1 < p) {
      exchange = g.send_recv(dst, (r + 1) % p, incoming, (r - 1 + p) % p);
    }
  }
}

void pipelined_gemm_collective(const ExecContext& ec, comm::ProcessGroup& g, bool reduce_scatter,
                               const Tensor& a, const Tensor& b, const Tensor& out,
                               const kernels::GemmOptions& opt, int splits, GemmWorkspace& ws) {
  const int p = g.size();
  const int64_t n = out.size(0);
  WEFT_CHECK(!opt.accumulate && opt.bias == nullptr,
             "pipelined GEMM: the bias is added after the reduction, and the output cannot "
             "accumulate");
  WEFT_CHECK(a.size(0) == (reduce_scatter ? p * n : n),
             "pipelined GEMM: input of {} rows for an output of {} rows over {} ranks", a.size(0),
             n, p);
  const int s = static_cast<int>(std::clamp<int64_t>(splits, 1, n));
  Tensor partial;
  if (reduce_scatter) {
    partial = ec.reuse(ws.partial, with_rows(out.shape(), p * n), out.dtype(), MemoryTag::comm);
  }
  std::vector<comm::Work> pending;
  pending.reserve(static_cast<size_t>(s));
  int64_t start = 0;
  for (int j = 0; j < s; ++j) {
    const int64_t rows = n / s + (j < n % s ? 1 : 0);
    Tensor dst = rows_of(out, start, rows);
    if (reduce_scatter) {
      // Chunk j of every rank's block, rank-major, as the reduce-scatter reads it.
      Tensor chunk = rows_of(partial, p * start, p * rows);
      for (int q = 0; q < p; ++q) {
        Tensor c = rows_of(chunk, q * rows, rows);
        kernels::gemm(ec, rows_of(a, q * n + start, rows), b, c, opt);
      }
      pending.push_back(g.reduce_scatter(dst, chunk));
    } else {
      kernels::gemm(ec, rows_of(a, start, rows), b, dst, opt);
      pending.push_back(g.all_reduce(dst));
    }
    start += rows;
  }
  for (const comm::Work& w : pending) w.wait(ec);
}

}  // namespace weft::parallel::overlap
