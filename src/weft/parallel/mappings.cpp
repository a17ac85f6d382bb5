#include "weft/parallel/mappings.h"

#include <cstring>

#include "weft/core/cuda.h"

namespace weft::parallel {

namespace {

bool trivial(comm::ProcessGroup* g) { return g == nullptr || g->size() == 1; }

int normalize(const Tensor& x, int dim) {
  int d = dim < 0 ? dim + x.dim() : dim;
  WEFT_CHECK(d >= 0 && d < x.dim(), "dimension {} out of range for a tensor of shape {}", dim,
             x.shape());
  return d;
}

// x viewed as (outer, n·inner) around `dim`: outer = Π dims before dim,
// inner = Π dims after dim. Sizes in bytes for the row block.
struct Blocks {
  int64_t outer;
  int64_t row_bytes;  // bytes of one outer entry (dims[dim] · inner elements)
};

Blocks blocks(const Tensor& x, int d) {
  int64_t outer = 1;
  for (int i = 0; i < d; ++i) outer *= x.shape()[i];
  return {outer, outer ? x.nbytes() / outer : 0};
}

// Copies block `b` of every outer row of `strided` (rows of `parts` blocks)
// into `packed` (rows of one block), or the reverse when `to_strided`. On a
// GPU one strided copy (cudaMemcpy2D) moves every row.
void move_blocks(Device d, char* packed, char* strided, int64_t outer, int64_t block_bytes,
                 int parts, int b, bool to_strided) {
  if (d.is_cuda()) {
    const auto width = static_cast<size_t>(block_bytes);
    const size_t pitch = width * static_cast<size_t>(parts);
    char* s = strided + b * block_bytes;
    if (to_strided) {
      cuda::copy_2d(s, pitch, packed, width, width, static_cast<size_t>(outer), d);
    } else {
      cuda::copy_2d(packed, width, s, pitch, width, static_cast<size_t>(outer), d);
    }
    return;
  }
  for (int64_t o = 0; o < outer; ++o) {
    char* s = strided + (o * parts + b) * block_bytes;
    char* p = packed + o * block_bytes;
    if (to_strided) {
      std::memcpy(s, p, static_cast<size_t>(block_bytes));
    } else {
      std::memcpy(p, s, static_cast<size_t>(block_bytes));
    }
  }
}

// x (rows, C) viewed as `parts` column blocks -> (parts, rows, C/parts) flat:
// block p of every row, contiguous per p.
Tensor slice_blocks_rank_major(const Tensor& x, int parts) {
  Tensor out = Tensor::empty({x.numel()}, x.dtype(), x.device(), MemoryTag::comm);
  const int64_t rows = x.shape().rows(), block = x.nbytes() / rows / parts;
  for (int p = 0; p < parts; ++p) {
    move_blocks(x.device(), static_cast<char*>(out.raw()) + p * rows * block,
                static_cast<char*>(x.raw()), rows, block, parts, p, false);
  }
  return out;
}

// The inverse: (parts, rows, C/parts) flat -> a tensor of shape `s` (rows, C).
Tensor unslice_blocks_rank_major(const Tensor& flat, const Shape& s, int parts) {
  Tensor out = Tensor::empty(s, flat.dtype(), flat.device(), MemoryTag::activations);
  const int64_t rows = out.shape().rows(), block = out.nbytes() / rows / parts;
  for (int p = 0; p < parts; ++p) {
    move_blocks(out.device(), static_cast<char*>(flat.raw()) + p * rows * block,
                static_cast<char*>(out.raw()), rows, block, parts, p, true);
  }
  return out;
}

}  // namespace

Tensor slice_along(const Tensor& x, int dim, int parts, int index) {
  int d = normalize(x, dim);
  WEFT_CHECK(x.shape()[d] % parts == 0,
             "cannot split dimension {} of size {} (shape {}) into {} equal parts", d, x.shape()[d],
             x.shape(), parts);
  Shape s = x.shape();
  s[d] /= parts;
  if (d == 0) return x.narrow(index * s[0], s[0]).clone();
  Tensor out = Tensor::empty(s, x.dtype(), x.device());
  Blocks b = blocks(x, d);
  move_blocks(x.device(), static_cast<char*>(out.raw()), static_cast<char*>(x.raw()), b.outer,
              b.row_bytes / parts, parts, index, false);
  return out;
}

Tensor all_gather_along(comm::ProcessGroup& g, const Tensor& x, int dim) {
  int d = normalize(x, dim);
  const int n = g.size();
  Shape s = x.shape();
  s[d] *= n;
  Tensor out = Tensor::empty(s, x.dtype(), x.device());
  if (d == 0) {
    g.all_gather(out, x).wait();
    return out;
  }
  // Ranks' blocks arrive one after another (rank-major); interleave them.
  Shape staged = x.shape();
  staged[0] *= n;
  Tensor stage = Tensor::empty(staged, x.dtype(), x.device());
  g.all_gather(stage.reshape({n * x.numel()}), x.reshape({x.numel()})).wait();
  Blocks b = blocks(x, d);
  for (int r = 0; r < n; ++r) {
    move_blocks(x.device(), static_cast<char*>(stage.raw()) + r * x.nbytes(),
                static_cast<char*>(out.raw()), b.outer, b.row_bytes, n, r, true);
  }
  return out;
}

Tensor reduce_scatter_along(comm::ProcessGroup& g, const Tensor& x, int dim) {
  int d = normalize(x, dim);
  const int n = g.size();
  WEFT_CHECK(x.shape()[d] % n == 0,
             "reduce-scatter: dimension {} of size {} (shape {}) is not divisible by the {} ranks "
             "of group '{}'",
             d, x.shape()[d], x.shape(), n, g.name());
  Shape s = x.shape();
  s[d] /= n;
  Tensor out = Tensor::empty(s, x.dtype(), x.device());
  if (d == 0) {
    g.reduce_scatter(out, x).wait();
    return out;
  }
  // Group each rank's blocks together (rank-major), then reduce-scatter.
  Tensor stage = Tensor::empty({x.numel()}, x.dtype(), x.device());
  Blocks b = blocks(x, d);
  for (int r = 0; r < n; ++r) {
    move_blocks(x.device(), static_cast<char*>(stage.raw()) + r * out.nbytes(),
                static_cast<char*>(x.raw()), b.outer, b.row_bytes / n, n, r, false);
  }
  g.reduce_scatter(out.reshape({out.numel()}), stage).wait();
  return out;
}

Tensor all_reduce_sum(comm::ProcessGroup& g, const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  g.all_reduce(out, x).wait();
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
Tensor rows_to_features(comm::ProcessGroup& g, const Tensor& x) {
  const int n = g.size();
  const int64_t c = x.shape().last();
  WEFT_CHECK(c % n == 0, "cannot split {} features (shape {}) over the {} ranks of group '{}'", c,
             x.shape(), n, g.name());
  Tensor stage = slice_blocks_rank_major(x, n);
  Shape s = x.shape();
  s[0] *= n;
  s[s.rank() - 1] = c / n;
  Tensor out = Tensor::empty(s, x.dtype(), x.device(), MemoryTag::activations);
  g.all_to_all(out.reshape({out.numel()}), stage.reshape({stage.numel()})).wait();
  return out;
}

// The dual: dy (n·size, ..., C/size) -> (n, ..., C): block p (rank p's
// rows, this rank's features) goes to rank p; the blocks received (this
// rank's rows, rank p's features) are put back at columns p.
Tensor features_to_rows(comm::ProcessGroup& g, const Tensor& dy) {
  const int n = g.size();
  Tensor recv = Tensor::empty({dy.numel()}, dy.dtype(), dy.device(), MemoryTag::comm);
  g.all_to_all(recv, dy.reshape({dy.numel()})).wait();
  Shape s = dy.shape();
  s[0] /= n;
  s[s.rank() - 1] *= n;
  return unslice_blocks_rank_major(recv, s, n);
}

// This rank's block along `dim`: a view of its rows for dimension 0.
Tensor own_rows(const Tensor& x, int dim, comm::ProcessGroup& g) {
  if (normalize(x, dim) != 0) return slice_along(x, dim, g.size(), g.rank());
  WEFT_CHECK(x.size(0) % g.size() == 0,
             "cannot split dimension 0 of size {} (shape {}) into {} equal parts", x.size(0),
             x.shape(), g.size());
  const int64_t n = x.size(0) / g.size();
  return x.narrow(g.rank() * n, n);
}

}  // namespace

Tensor forward(Mapping m, comm::ProcessGroup* g, const Tensor& x, int sp_dim) {
  if (trivial(g)) return x;
  const int last = x.dim() - 1;
  switch (m) {
    case Mapping::copy_to_tp: return x;
    case Mapping::reduce_from_tp: return all_reduce_sum(*g, x);
    case Mapping::scatter_to_tp: return slice_along(x, last, g->size(), g->rank());
    case Mapping::gather_from_tp: return all_gather_along(*g, x, last);
    case Mapping::scatter_to_sp: return own_rows(x, sp_dim, *g);
    case Mapping::gather_from_sp: return all_gather_along(*g, x, sp_dim);
    case Mapping::reduce_scatter_to_sp: return reduce_scatter_along(*g, x, sp_dim);
    case Mapping::sp_to_tp: return rows_to_features(*g, x);
  }
  return x;
}

Tensor backward(Mapping m, comm::ProcessGroup* g, const Tensor& dy, int sp_dim) {
  if (trivial(g)) return dy;
  const int last = dy.dim() - 1;
  switch (m) {
    case Mapping::copy_to_tp: return all_reduce_sum(*g, dy);
    case Mapping::reduce_from_tp: return dy;
    case Mapping::scatter_to_tp: return all_gather_along(*g, dy, last);
    case Mapping::gather_from_tp: return slice_along(dy, last, g->size(), g->rank());
    case Mapping::scatter_to_sp: return all_gather_along(*g, dy, sp_dim);
    case Mapping::gather_from_sp: return reduce_scatter_along(*g, dy, sp_dim);
    case Mapping::reduce_scatter_to_sp: return all_gather_along(*g, dy, sp_dim);
    case Mapping::sp_to_tp: return features_to_rows(*g, dy);
  }
  return dy;
}

}  // namespace weft::parallel
