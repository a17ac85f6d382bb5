#include "weft/nn/router.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace weft::nn {

namespace {

// Softmax of one row of logits into p; returns the row's logsumexp.
float softmax_row(const float* l, int64_t e, float* p) {
  float m = l[0];
  for (int64_t i = 1; i < e; ++i) m = std::max(m, l[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < e; ++i) sum += std::exp(static_cast<double>(l[i] - m));
  for (int64_t i = 0; i < e; ++i) {
    p[i] = static_cast<float>(std::exp(static_cast<double>(l[i] - m)) / sum);
  }
  return m + static_cast<float>(std::log(sum));
}

// Slot (n, j)'s expert and gate: the k best logits, the lower index first
// among equals (deterministic ties).
void choose(const float* l, const float* p, Routing& r, int64_t n) {
  const int64_t k = r.top_k;
  std::vector<int32_t> idx(static_cast<size_t>(r.experts));
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [l](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
  for (int64_t j = 0; j < k; ++j)
    r.expert[static_cast<size_t>(n * k + j)] = idx[static_cast<size_t>(j)];
  if (k == 1) {
    r.gate[static_cast<size_t>(n)] = p[idx[0]];
    return;
  }
  // Mixtral: a softmax over the chosen logits.
  const float top = l[idx[0]];
  double sum = 0.0;
  for (int64_t j = 0; j < k; ++j)
    sum += std::exp(static_cast<double>(l[idx[static_cast<size_t>(j)]] - top));
  for (int64_t j = 0; j < k; ++j) {
    r.gate[static_cast<size_t>(n * k + j)] = static_cast<float>(
        std::exp(static_cast<double>(l[idx[static_cast<size_t>(j)]] - top)) / sum);
  }
}

// Marks slots over an expert's capacity as dropped: first choices before
// second choices, each in token order.
void apply_capacity(Routing& r, float factor) {
  const int64_t cap = static_cast<int64_t>(
      std::ceil(static_cast<double>(factor) * static_cast<double>(r.tokens * r.top_k) /
                static_cast<double>(r.experts)));
  std::vector<int64_t> taken(static_cast<size_t>(r.experts), 0);
  for (int64_t j = 0; j < r.top_k; ++j) {
    for (int64_t n = 0; n < r.tokens; ++n) {
      const size_t s = static_cast<size_t>(n * r.top_k + j);
      int64_t& t = taken[static_cast<size_t>(r.expert[s])];
      if (t < cap) {
        ++t;
      } else {
        r.kept[s] = 0;
      }
    }
  }
}

}  // namespace

Routing route_tokens(std::span<const float> logits, int64_t tokens, const RoutingOptions& opt) {
  const int64_t e = opt.experts, k = opt.top_k;
  WEFT_CHECK(e >= 1 && (k == 1 || k == 2) && k <= e,
             "routing needs 1 or 2 experts per token out of at least that many, got top_k {} of {}",
             k, e);
  WEFT_CHECK(static_cast<int64_t>(logits.size()) == tokens * e,
             "routing: {} logits for {} tokens × {} experts", logits.size(), tokens, e);
  WEFT_CHECK(opt.capacity_factor >= 0.0f, "the capacity factor must be >= 0, got {}",
             opt.capacity_factor);
  Routing r;
  r.tokens = tokens;
  r.experts = e;
  r.top_k = k;
  const size_t slots = static_cast<size_t>(tokens * k);
  r.expert.resize(slots);
  r.gate.resize(slots);
  r.kept.assign(slots, 1);
  r.probs.resize(static_cast<size_t>(tokens * e));
  r.lse.resize(static_cast<size_t>(tokens));
  for (int64_t n = 0; n < tokens; ++n) {
    const float* l = logits.data() + n * e;
    float* p = r.probs.data() + n * e;
    r.lse[static_cast<size_t>(n)] = softmax_row(l, e, p);
    choose(l, p, r, n);
  }
  if (opt.capacity_factor > 0.0f) apply_capacity(r, opt.capacity_factor);
  r.routed.assign(static_cast<size_t>(e), 0);
  r.counts.assign(static_cast<size_t>(e), 0);
  // A counting sort by expert keeps token order inside each expert (stable).
  std::vector<std::vector<int64_t>> by_expert(static_cast<size_t>(e));
  for (size_t s = 0; s < slots; ++s) {
    const size_t x = static_cast<size_t>(r.expert[s]);
    ++r.routed[x];
    if (r.kept[s]) by_expert[x].push_back(static_cast<int64_t>(s));
  }
  for (size_t x = 0; x < by_expert.size(); ++x) {
    r.counts[x] = static_cast<int64_t>(by_expert[x].size());
    r.order.insert(r.order.end(), by_expert[x].begin(), by_expert[x].end());
  }
  // Losses in double: the sums run over every token.
  const double nt = static_cast<double>(std::max<int64_t>(tokens, 1));
  double aux = 0.0, z = 0.0;
  for (int64_t x = 0; x < e; ++x) {
    double pe = 0.0;
    for (int64_t n = 0; n < tokens; ++n) pe += r.probs[static_cast<size_t>(n * e + x)];
    aux += static_cast<double>(r.routed[static_cast<size_t>(x)]) / nt * (pe / nt);
  }
  r.aux_loss = static_cast<float>(static_cast<double>(e) * aux);
  if (opt.z_loss) {
    for (float v : r.lse) z += static_cast<double>(v) * v;
    r.z_loss = static_cast<float>(z / nt);
  }
  return r;
}

std::vector<float> route_backward(const Routing& r, std::span<const float> dgate, float aux_weight,
                                  float z_weight) {
  const int64_t e = r.experts, k = r.top_k, tokens = r.tokens;
  WEFT_CHECK(static_cast<int64_t>(dgate.size()) == tokens * k,
             "route_backward: {} gate gradients for {} tokens × top-{}", dgate.size(), tokens, k);
  const float nt = static_cast<float>(std::max<int64_t>(tokens, 1));
  std::vector<float> dl(static_cast<size_t>(tokens * e), 0.0f), dp(static_cast<size_t>(e));
  for (int64_t n = 0; n < tokens; ++n) {
    const float* p = r.probs.data() + n * e;
    float* d = dl.data() + n * e;
    // The probabilities' gradient: the load-balancing loss's through P_e,
    // and Switch's gate (k = 1) is a probability too.
    for (int64_t x = 0; x < e; ++x) {
      const size_t i = static_cast<size_t>(x);
      dp[i] = r.load.empty()
                  ? aux_weight * static_cast<float>(e) * static_cast<float>(r.routed[i]) / nt / nt
                  : aux_weight * static_cast<float>(e) * r.load[i] / nt;
    }
    if (k == 1)
      dp[static_cast<size_t>(r.expert[static_cast<size_t>(n)])] += dgate[static_cast<size_t>(n)];
    float dot = 0.0f;
    for (int64_t x = 0; x < e; ++x) dot += p[x] * dp[static_cast<size_t>(x)];
    for (int64_t x = 0; x < e; ++x) d[x] = p[x] * (dp[static_cast<size_t>(x)] - dot);
    if (k == 2) {
      // Mixtral's gates are a softmax over the chosen logits.
      const size_t s = static_cast<size_t>(n * k);
      float gdot = 0.0f;
      for (int64_t j = 0; j < k; ++j)
        gdot += r.gate[s + static_cast<size_t>(j)] * dgate[s + static_cast<size_t>(j)];
      for (int64_t j = 0; j < k; ++j) {
        const size_t sj = s + static_cast<size_t>(j);
        d[r.expert[sj]] += r.gate[sj] * (dgate[sj] - gdot);
      }
    }
    if (z_weight != 0.0f) {
      const float c = z_weight * 2.0f * r.lse[static_cast<size_t>(n)] / nt;
      for (int64_t x = 0; x < e; ++x) d[x] += c * p[x];
    }
  }
  return dl;
}

RouterConfig Router::checked(RouterConfig cfg) {
  WEFT_CHECK(cfg.width > 0, "{}: the router needs a positive width, got {}", cfg.name, cfg.width);
  WEFT_CHECK(cfg.routing.experts >= 2, "{}: a router needs at least 2 experts, got {}", cfg.name,
             cfg.routing.experts);
  WEFT_CHECK(cfg.routing.top_k == 1 || cfg.routing.top_k == 2, "{}: top_k must be 1 or 2, got {}",
             cfg.name, cfg.routing.top_k);
  WEFT_CHECK(cfg.aux_coef >= 0.0f && cfg.z_coef >= 0.0f,
             "{}: the auxiliary loss coefficients must be >= 0, got {} and {}", cfg.name,
             cfg.aux_coef, cfg.z_coef);
  cfg.routing.z_loss = cfg.z_coef > 0.0f;
  return cfg;
}

Router::Router(ContextPtr context, RouterConfig cfg)
    : Module(cfg.name),
      pc_(std::move(context)),
      cfg_(checked(std::move(cfg))),
      linear_(pc_, {.name = cfg_.name,
                    .in = cfg_.width,
                    .out = cfg_.routing.experts,
                    .mode = Parallel::none,
                    .bias = false,
                    .init_std = cfg_.init_std}) {}

Tensor Router::forward(Ctx& ctx, const Tensor& x) {
  WEFT_CHECK(x.dim() == 2, "{}: the router takes (tokens, width), got {}", cfg_.name, x.shape());
  Tensor logits = linear_.forward(ctx, x).to(Device::cpu()).to(DType::f32);
  Saved& s = ctx.saved<Saved>(this);
  s.routing = route_tokens({logits.data<float>(), static_cast<size_t>(logits.numel())}, x.size(0),
                           cfg_.routing);
  last_counts_ = s.routing.counts;
  if (pc_->cp_size() > 1) balance_over_cp(s.routing);
  return Tensor::from({x.size(0), cfg_.routing.top_k}, s.routing.gate);
}

Tensor Router::backward(Ctx& ctx, const Tensor& dgate) {
  Saved& s = ctx.saved<Saved>(this);
  WEFT_CHECK(s.routing.top_k > 0, "{}: backward without a forward in this context", cfg_.name);
  const Tensor dg = dgate.to(Device::cpu()).to(DType::f32);
  std::vector<float> dl =
      route_backward(s.routing, {dg.data<float>(), static_cast<size_t>(dg.numel())},
                     s.loss_scale * cfg_.aux_coef, s.loss_scale * cfg_.z_coef);
  const Shape shape{s.routing.tokens, s.routing.experts};
  ctx.release(this);
  Tensor dlogits = Tensor::from(shape, dl, pc_->compute()).to(pc_->exec.device());
  return linear_.backward(ctx, dlogits);
}

void Router::balance_over_cp(Routing& r) const {
  // The whole sequences' f_e and P_e: routed slots, probability sums and
  // tokens summed over the cp group, in f64.
  const int64_t e = r.experts;
  Tensor sums = Tensor::zeros({2 * e + 1}, DType::f64);
  double* v = sums.data<double>();
  for (int64_t x = 0; x < e; ++x) {
    v[x] = static_cast<double>(r.routed[static_cast<size_t>(x)]);
    for (int64_t n = 0; n < r.tokens; ++n) v[e + x] += r.probs[static_cast<size_t>(n * e + x)];
  }
  v[2 * e] = static_cast<double>(r.tokens);
  pc_->cp->all_reduce(sums).wait();
  const double total = std::max(v[2 * e], 1.0);
  double aux = 0.0;
  r.load.assign(static_cast<size_t>(e), 0.0f);
  for (int64_t x = 0; x < e; ++x) {
    aux += v[x] / total * (v[e + x] / total);
    // dA/dp of a token is E·f_e/total; the gradient average over cp divides
    // by total/local: route_backward's E·f_e/local per token gives it.
    r.load[static_cast<size_t>(x)] = static_cast<float>(v[x] / total);
  }
  r.aux_loss = static_cast<float>(static_cast<double>(e) * aux);
}

const Routing& Router::routing(Ctx& ctx) { return ctx.saved<Saved>(this).routing; }

void Router::set_loss_scale(Ctx& ctx, float scale) { ctx.saved<Saved>(this).loss_scale = scale; }

float Router::weighted_aux_loss(Ctx& ctx) {
  const Routing& r = routing(ctx);
  return cfg_.aux_coef * r.aux_loss + cfg_.z_coef * r.z_loss;
}

}  // namespace weft::nn
