#include "weft/parallel/mappings.h"

#include <cstring>

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

// Copies block `b` of every outer row of `src` (rows of `parts` blocks) into
// `dst` (rows of one block), or the reverse when `gather`.
void move_blocks(char* packed, char* strided, int64_t outer, int64_t block_bytes, int parts, int b,
                 bool to_strided) {
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

}  // namespace

Tensor slice_along(const Tensor& x, int dim, int parts, int index) {
  int d = normalize(x, dim);
  WEFT_CHECK(x.shape()[d] % parts == 0,
             "cannot split dimension {} of size {} (shape {}) into {} equal parts", d, x.shape()[d],
             x.shape(), parts);
  Shape s = x.shape();
  s[d] /= parts;
  if (d == 0) return x.narrow(index * s[0], s[0]).clone();
  Tensor out = Tensor::empty(s, x.dtype());
  Blocks b = blocks(x, d);
  move_blocks(static_cast<char*>(out.raw()), static_cast<char*>(x.raw()), b.outer,
              b.row_bytes / parts, parts, index, false);
  return out;
}

Tensor all_gather_along(comm::ProcessGroup& g, const Tensor& x, int dim) {
  int d = normalize(x, dim);
  const int n = g.size();
  Shape s = x.shape();
  s[d] *= n;
  Tensor out = Tensor::empty(s, x.dtype());
  if (d == 0) {
    g.all_gather(out, x).wait();
    return out;
  }
  // Ranks' blocks arrive one after another (rank-major); interleave them.
  Shape staged = x.shape();
  staged[0] *= n;
  Tensor stage = Tensor::empty(staged, x.dtype());
  g.all_gather(stage.reshape({n * x.numel()}), x.reshape({x.numel()})).wait();
  Blocks b = blocks(x, d);
  for (int r = 0; r < n; ++r) {
    move_blocks(static_cast<char*>(stage.raw()) + r * x.nbytes(), static_cast<char*>(out.raw()),
                b.outer, b.row_bytes, n, r, true);
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
  Tensor out = Tensor::empty(s, x.dtype());
  if (d == 0) {
    g.reduce_scatter(out, x).wait();
    return out;
  }
  // Group each rank's blocks together (rank-major), then reduce-scatter.
  Tensor stage = Tensor::empty({x.numel()}, x.dtype());
  Blocks b = blocks(x, d);
  for (int r = 0; r < n; ++r) {
    move_blocks(static_cast<char*>(stage.raw()) + r * out.nbytes(), static_cast<char*>(x.raw()),
                b.outer, b.row_bytes / n, n, r, false);
  }
  g.reduce_scatter(out.reshape({out.numel()}), stage).wait();
  return out;
}

Tensor all_reduce_sum(comm::ProcessGroup& g, const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  g.all_reduce(out, x).wait();
  return out;
}

Tensor forward(Mapping m, comm::ProcessGroup* g, const Tensor& x, int sp_dim) {
  if (trivial(g)) return x;
  const int last = x.dim() - 1;
  switch (m) {
    case Mapping::copy_to_tp: return x;
    case Mapping::reduce_from_tp: return all_reduce_sum(*g, x);
    case Mapping::scatter_to_tp: return slice_along(x, last, g->size(), g->rank());
    case Mapping::gather_from_tp: return all_gather_along(*g, x, last);
    case Mapping::scatter_to_sp: return slice_along(x, sp_dim, g->size(), g->rank());
    case Mapping::gather_from_sp: return all_gather_along(*g, x, sp_dim);
    case Mapping::reduce_scatter_to_sp: return reduce_scatter_along(*g, x, sp_dim);
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
  }
  return dy;
}

}  // namespace weft::parallel
