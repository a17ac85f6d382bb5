#include "weft/parallel/mappings.h"

#include "weft/kernels/transpose.h"

namespace weft::parallel {

namespace {

bool trivial(comm::ProcessGroup* g) { return g == nullptr || g->size() == 1; }

int normalize(const Tensor& x, int dim) {
  int d = dim < 0 ? dim + x.dim() : dim;
  WEFT_CHECK(d >= 0 && d < x.dim(), "dimension {} out of range for a tensor of shape {}", dim,
             x.shape());
  return d;
}

// x viewed as (outer, parts, inner) around dimension d split into `parts`:
// outer = Π dims before d, inner = the elements of one part of one outer entry.
Shape around(const Tensor& x, int d, int parts) {
  int64_t outer = 1;
  for (int i = 0; i < d; ++i) outer *= x.shape()[i];
  const int64_t inner = outer ? x.numel() / outer / parts : 0;
  return {outer, parts, inner};
}

// (a, b, c) -> (b, a, c) through the transpose kernel on `ec`.
Tensor swapped(const ExecContext& ec, const Tensor& x, const Shape& abc, MemoryTag tag) {
  Tensor out = ec.empty({abc[1], abc[0], abc[2]}, x.dtype(), tag);
  kernels::transpose01(ec, x.reshape(abc), out);
  return out;
}

}  // namespace

Tensor slice_along(const ExecContext& ec, const Tensor& x, int dim, int parts, int index) {
  int d = normalize(x, dim);
  WEFT_CHECK(x.shape()[d] % parts == 0,
             "cannot split dimension {} of size {} (shape {}) into {} equal parts", d, x.shape()[d],
             x.shape(), parts);
  Shape s = x.shape();
  s[d] /= parts;
  if (d == 0) return x.narrow(index * s[0], s[0]).clone();
  // The parts rank-major, then this one: a view of the staged copy.
  const Shape abc = around(x, d, parts);
  const Tensor staged = swapped(ec, x, abc, MemoryTag::activations);
  return staged.reshape({parts, abc[0] * abc[2]}).narrow(index, 1).reshape(s);
}

Tensor all_gather_along(const ExecContext& ec, comm::ProcessGroup& g, const Tensor& x, int dim) {
  int d = normalize(x, dim);
  const int n = g.size();
  Shape s = x.shape();
  s[d] *= n;
  Tensor out = ec.empty(s, x.dtype());
  if (d == 0) {
    g.all_gather(out, x).wait(ec);
    return out;
  }
  // Ranks' blocks arrive one after another (rank-major); interleave them.
  Tensor stage = ec.empty({n * x.numel()}, x.dtype(), MemoryTag::comm);
  g.all_gather(stage, x.reshape({x.numel()})).wait(ec);
  const Shape abc = around(out, d, n);
  Tensor interleaved = out.reshape(abc);
  kernels::transpose01(ec, stage.reshape({abc[1], abc[0], abc[2]}), interleaved);
  return out;
}

Tensor reduce_scatter_along(const ExecContext& ec, comm::ProcessGroup& g, const Tensor& x,
                            int dim) {
  int d = normalize(x, dim);
  const int n = g.size();
  WEFT_CHECK(x.shape()[d] % n == 0,
             "reduce-scatter: dimension {} of size {} (shape {}) is not divisible by the {} ranks "
             "of group '{}'",
             d, x.shape()[d], x.shape(), n, g.name());
  Shape s = x.shape();
  s[d] /= n;
  Tensor out = ec.empty(s, x.dtype());
  if (d == 0) {
    g.reduce_scatter(out, x).wait(ec);
    return out;
  }
  // Group each rank's blocks together (rank-major), then reduce-scatter.
  const Tensor stage = swapped(ec, x, around(x, d, n), MemoryTag::comm);
  g.reduce_scatter(out.reshape({out.numel()}), stage.reshape({stage.numel()})).wait(ec);
  return out;
}

Tensor all_reduce_sum(const ExecContext& ec, comm::ProcessGroup& g, const Tensor& x) {
  Tensor out = ec.empty(x.shape(), x.dtype());
  g.all_reduce(out, x).wait(ec);
  return out;
}

Tensor Pending::get(const ExecContext& ec) const {
  work.wait(ec);
  return tensor;
}

Pending all_gather_rows(const ExecContext& ec, comm::ProcessGroup* g, const Tensor& x,
                        Tensor& buffer) {
  if (trivial(g)) return {x, {}};
  WEFT_CHECK(x.dim() >= 1, "all-gather of rows needs a tensor of rank >= 1");
  Shape s = x.shape();
  s[0] *= g->size();
  Tensor out = ec.reuse(buffer, s, x.dtype(), MemoryTag::comm);
  return {out, g->all_gather(out, x)};
}

Pending reduce_scatter_rows(const ExecContext& ec, comm::ProcessGroup* g, const Tensor& x,
                            Tensor& buffer) {
  if (trivial(g)) return {x, {}};
  WEFT_CHECK(x.dim() >= 1 && x.size(0) % g->size() == 0,
             "reduce-scatter: {} rows (shape {}) do not split evenly over the {} ranks of group "
             "'{}'",
             x.dim() ? x.size(0) : 0, x.shape(), g->size(), g->name());
  Shape s = x.shape();
  s[0] /= g->size();
  Tensor out = ec.reuse(buffer, s, x.dtype(), MemoryTag::activations);
  return {out, g->reduce_scatter(out, x)};
}

namespace {

// x (n, ..., C) [this rank's rows, all features] -> (n·size, ..., C/size)
// [every rank's rows, this rank's features], as one all-to-all: the features
// of x are regrouped rank-major (block p: the columns rank p keeps), so that
// block p of the result holds rank p's rows.
Tensor rows_to_features(const ExecContext& ec, comm::ProcessGroup& g, const Tensor& x) {
  const int n = g.size();
  const int64_t c = x.shape().last();
  WEFT_CHECK(c % n == 0, "cannot split {} features (shape {}) over the {} ranks of group '{}'", c,
             x.shape(), n, g.name());
  const Tensor stage = swapped(ec, x, {x.shape().rows(), n, c / n}, MemoryTag::comm);
  Shape s = x.shape();
  s[0] *= n;
  s[s.rank() - 1] = c / n;
  Tensor out = ec.empty(s, x.dtype(), MemoryTag::activations);
  g.all_to_all(out.reshape({out.numel()}), stage.reshape({stage.numel()})).wait(ec);
  return out;
}

// The dual: dy (n·size, ..., C/size) -> (n, ..., C): block p (rank p's
// rows, this rank's features) goes to rank p; the blocks received (this
// rank's rows, rank p's features) are put back at columns p.
Tensor features_to_rows(const ExecContext& ec, comm::ProcessGroup& g, const Tensor& dy) {
  const int n = g.size();
  Tensor recv = ec.empty({dy.numel()}, dy.dtype(), MemoryTag::comm);
  g.all_to_all(recv, dy.reshape({dy.numel()})).wait(ec);
  Shape s = dy.shape();
  s[0] /= n;
  s[s.rank() - 1] *= n;
  const int64_t rows = dy.shape().rows() / n, block = dy.shape().last();
  Tensor out = ec.empty(s, dy.dtype(), MemoryTag::activations);
  Tensor by_row = out.reshape({rows, n, block});
  kernels::transpose01(ec, recv.reshape({n, rows, block}), by_row);
  return out;
}

// This rank's block along `dim`: a view of its rows for dimension 0.
Tensor own_rows(const ExecContext& ec, const Tensor& x, int dim, comm::ProcessGroup& g) {
  if (normalize(x, dim) != 0) return slice_along(ec, x, dim, g.size(), g.rank());
  WEFT_CHECK(x.size(0) % g.size() == 0,
             "cannot split dimension 0 of size {} (shape {}) into {} equal parts", x.size(0),
             x.shape(), g.size());
  const int64_t n = x.size(0) / g.size();
  return x.narrow(g.rank() * n, n);
}

}  // namespace

Tensor forward(const ExecContext& ec, Mapping m, comm::ProcessGroup* g, const Tensor& x,
               int sp_dim) {
  if (trivial(g)) return x;
  const int last = x.dim() - 1;
  switch (m) {
    case Mapping::copy_to_tp: return x;
    case Mapping::reduce_from_tp: return all_reduce_sum(ec, *g, x);
    case Mapping::scatter_to_tp: return slice_along(ec, x, last, g->size(), g->rank());
    case Mapping::gather_from_tp: return all_gather_along(ec, *g, x, last);
    case Mapping::scatter_to_sp: return own_rows(ec, x, sp_dim, *g);
    case Mapping::gather_from_sp: return all_gather_along(ec, *g, x, sp_dim);
    case Mapping::reduce_scatter_to_sp: return reduce_scatter_along(ec, *g, x, sp_dim);
    case Mapping::sp_to_tp: return rows_to_features(ec, *g, x);
  }
  return x;
}

Tensor backward(const ExecContext& ec, Mapping m, comm::ProcessGroup* g, const Tensor& dy,
                int sp_dim) {
  if (trivial(g)) return dy;
  const int last = dy.dim() - 1;
  switch (m) {
    case Mapping::copy_to_tp: return all_reduce_sum(ec, *g, dy);
    case Mapping::reduce_from_tp: return dy;
    case Mapping::scatter_to_tp: return all_gather_along(ec, *g, dy, last);
    case Mapping::gather_from_tp: return slice_along(ec, dy, last, g->size(), g->rank());
    case Mapping::scatter_to_sp: return all_gather_along(ec, *g, dy, sp_dim);
    case Mapping::gather_from_sp: return reduce_scatter_along(ec, *g, dy, sp_dim);
    case Mapping::reduce_scatter_to_sp: return all_gather_along(ec, *g, dy, sp_dim);
    case Mapping::sp_to_tp: return features_to_rows(ec, *g, dy);
  }
  return dy;
}

}  // namespace weft::parallel
