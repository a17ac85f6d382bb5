#include "weft/nn/moe_dispatch.h"

namespace weft::nn {

namespace {

// The host f32 copy the loops read.
std::vector<float> host_values(const Tensor& t) { return t.to(Device::cpu()).to_vector(); }

Tensor on(const ExecContext& ec, const Shape& shape, const std::vector<float>& v, DType dtype) {
  return Tensor::from(shape, v, dtype).to(ec.device());
}

size_t at(int64_t row, int64_t width, int64_t col = 0) {
  return static_cast<size_t>(row * width + col);
}

}  // namespace

Tensor dispatch_tokens(const ExecContext& ec, const Tensor& x, const Routing& r) {
  WEFT_CHECK(x.dim() == 2 && x.size(0) == r.tokens, "dispatch: input {} for {} tokens", x.shape(),
             r.tokens);
  const int64_t c = x.size(1), m = static_cast<int64_t>(r.order.size());
  const std::vector<float> xv = host_values(x);
  std::vector<float> out(at(m, c));
  for (int64_t i = 0; i < m; ++i) {
    const int64_t n = r.order[static_cast<size_t>(i)] / r.top_k;
    std::copy_n(xv.begin() + static_cast<std::ptrdiff_t>(at(n, c)), c,
                out.begin() + static_cast<std::ptrdiff_t>(at(i, c)));
  }
  return on(ec, {m, c}, out, x.dtype());
}

Tensor dispatch_backward(const ExecContext& ec, const Tensor& dxp, const Routing& r) {
  const int64_t c = dxp.size(1), m = static_cast<int64_t>(r.order.size());
  WEFT_CHECK(dxp.dim() == 2 && dxp.size(0) == m, "dispatch backward: gradient {} for {} slots",
             dxp.shape(), m);
  const std::vector<float> g = host_values(dxp);
  std::vector<float> dx(at(r.tokens, c), 0.0f);
  for (int64_t i = 0; i < m; ++i) {
    const int64_t n = r.order[static_cast<size_t>(i)] / r.top_k;
    for (int64_t j = 0; j < c; ++j) dx[at(n, c, j)] += g[at(i, c, j)];
  }
  return on(ec, {r.tokens, c}, dx, dxp.dtype());
}

Tensor combine_tokens(const ExecContext& ec, const Tensor& o, const Routing& r, DType dtype) {
  const int64_t c = o.size(1), m = static_cast<int64_t>(r.order.size());
  WEFT_CHECK(o.dim() == 2 && o.size(0) == m, "combine: {} expert rows for {} slots", o.shape(), m);
  const std::vector<float> ov = host_values(o);
  std::vector<float> y(at(r.tokens, c), 0.0f);
  for (int64_t i = 0; i < m; ++i) {
    const int64_t s = r.order[static_cast<size_t>(i)], n = s / r.top_k;
    const float gate = r.gate[static_cast<size_t>(s)];
    for (int64_t j = 0; j < c; ++j) y[at(n, c, j)] += gate * ov[at(i, c, j)];
  }
  return on(ec, {r.tokens, c}, y, dtype);
}

CombineGrads combine_backward(const ExecContext& ec, const Tensor& dy, const Tensor& o,
                              const Routing& r) {
  const int64_t c = o.size(1), m = static_cast<int64_t>(r.order.size());
  WEFT_CHECK(dy.dim() == 2 && dy.size(0) == r.tokens && dy.size(1) == c,
             "combine backward: gradient {} for {} tokens × {}", dy.shape(), r.tokens, c);
  const std::vector<float> dyv = host_values(dy), ov = host_values(o);
  CombineGrads out;
  out.dgate.assign(static_cast<size_t>(r.tokens * r.top_k), 0.0f);
  std::vector<float> d(at(m, c));
  for (int64_t i = 0; i < m; ++i) {
    const int64_t s = r.order[static_cast<size_t>(i)], n = s / r.top_k;
    const float gate = r.gate[static_cast<size_t>(s)];
    double dot = 0.0;
    for (int64_t j = 0; j < c; ++j) {
      d[at(i, c, j)] = gate * dyv[at(n, c, j)];
      dot += static_cast<double>(dyv[at(n, c, j)]) * ov[at(i, c, j)];
    }
    out.dgate[static_cast<size_t>(s)] = static_cast<float>(dot);
  }
  out.dexperts = on(ec, {m, c}, d, dy.dtype());
  return out;
}

}  // namespace weft::nn
