// Router: the top-k softmax gate of a Mixture-of-Experts MLP (nn/moe_mlp.h).
//
//   x (N, C) -> logits = x·Wᵀ (W: E × C, a Linear without bias, replicated
//   over TP) -> p = softmax(logits) (f32)
//   -> each token's k best experts (k = 1 or 2) and their gate values
//
// Gate values. k = 1 follows Switch: the chosen expert's softmax probability
// (so the language-model loss trains the router). k = 2 follows Mixtral:
// a softmax over the two chosen logits (the gates sum to 1; with k = 1 that
// rule would always give 1 and the router would learn only from the
// auxiliary loss).
//
// Ties: experts are ranked by logit, the lower index first among equal
// logits, so routing is a pure function of the logits and runs are bitwise
// reproducible.
//
// Auxiliary losses (unscaled; the model weighs them by their coefficients):
//   load balance  aux = E · Σ_e f_e · P_e, f_e = the tokens routed to e / N
//                 (a token counts once in each of its k experts, before any
//                 drop: Hugging Face's Mixtral), P_e = the mean of p_e over the
//                 tokens; balanced routing gives k. f is a count: only P
//                 carries gradient.
//   z-loss        z = mean over tokens of logsumexp(logits)² (ST-MoE), when
//                 its coefficient is non-zero.
//
// Under context parallelism a cp group's ranks hold chunks of the same
// sequences: f_e and P_e are summed over the group (one all-reduce of 2E+1
// numbers), so the load-balancing loss is the whole sequences', as at cp 1,
// and each rank's P_e gradient is its tokens' share of it (scaled by the
// group's size, which the gradient average over cp divides out).
//
// Capacity (capacity_factor > 0): each expert takes at most
// ceil(capacity_factor · N · k / E) tokens; first choices are served before
// second choices (GShard's priority), each in token order. A dropped slot's
// expert output is zero: the token passes the MoE block through its residual
// alone. 0 (the default) is dropless.
//
// The routing itself (top-k, gates, capacity, the dispatch order) is host
// code on E floats per token: small beside the expert GEMMs, and the counts
// it produces are what expert parallelism's all_to_all will need on the host
// anyway. The logits are copied to the host once per forward.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "weft/nn/linear.h"
#include "weft/nn/module.h"

namespace weft::nn {

struct RoutingOptions {
  int64_t experts = 0;           // E
  int64_t top_k = 2;             // k: 1 or 2
  float capacity_factor = 0.0f;  // 0: dropless
  bool z_loss = false;           // compute the z-loss
};

// One forward's routing decisions and what backward needs of them.
struct Routing {
  int64_t tokens = 0, experts = 0, top_k = 0;
  std::vector<int32_t> expert{};  // (tokens, k): chosen experts, best first
  std::vector<float> gate{};      // (tokens, k): gate values
  std::vector<uint8_t> kept{};    // (tokens, k): 0 for a slot dropped over capacity
  std::vector<int64_t> routed{};  // (E): slots routed to each expert, before drops
  std::vector<int64_t> counts{};  // (E): slots each expert processes (after drops)
  // The kept slots (n·k + j) sorted by (expert, token): the order in which
  // tokens are dispatched to the experts, counts[e] of them for expert e.
  std::vector<int64_t> order{};
  std::vector<float> probs{};  // (tokens, E): softmax of the logits
  std::vector<float> lse{};    // (tokens): logsumexp of the logits
  // (E): f_e of the load-balancing loss when it is the whole sequences'
  // (context parallelism: routed slots summed over the cp group, over its
  // tokens); empty: routed / tokens.
  std::vector<float> load{};
  float aux_loss = 0.0f;  // load balance, unscaled
  float z_loss = 0.0f;    // unscaled; 0 unless options.z_loss
};

// logits (tokens, E) row-major f32 -> the routing.
Routing route_tokens(std::span<const float> logits, int64_t tokens, const RoutingOptions& opt);

// The gradient of the logits (tokens, E) from the gates' gradient dgate
// (tokens, k) and the auxiliary losses' weights in the total loss
// (coefficient × the loss's gradient scale).
std::vector<float> route_backward(const Routing& r, std::span<const float> dgate, float aux_weight,
                                  float z_weight);

struct RouterConfig {
  std::string name{};  // "h.3.mlp.router": parameter <name>.weight (E, C)
  int64_t width = 0;   // C
  RoutingOptions routing{};
  float aux_coef = 0.01f;  // the load-balancing loss's weight (Mixtral's)
  float z_coef = 0.0f;     // the z-loss's weight; 0: no z-loss
  float init_std = 0.02f;
};

class Router : public Module {
 public:
  Router(ContextPtr context, RouterConfig cfg);

  // x (N, C) in the compute dtype -> the gates (N, k) f32 on the host; the
  // rest of the routing is routing(ctx).
  Tensor forward(Ctx& ctx, const Tensor& x) override;
  // dgate (N, k) f32 -> dx (N, C) in the compute dtype, with the auxiliary
  // losses' gradients (weighted by their coefficients and the loss scale)
  // added to the logits' gradient; the weight's gradient accumulates.
  Tensor backward(Ctx& ctx, const Tensor& dgate) override;
  std::vector<Module*> children() override { return {&linear_}; }

  const Routing& routing(Ctx& ctx);
  // The gradient scale of the loss this forward's auxiliary losses join
  // (Gpt::backward_loss's dloss); 1 unless set.
  void set_loss_scale(Ctx& ctx, float scale);
  // coef·aux + coef·z of this forward.
  float weighted_aux_loss(Ctx& ctx);
  // Slots each expert processed in the latest forward (load balance reports).
  const std::vector<int64_t>& last_counts() const { return last_counts_; }
  const RouterConfig& config() const { return cfg_; }
  Linear& linear() { return linear_; }

 private:
  struct Saved {
    Routing routing;
    float loss_scale = 1.0f;
  };
  static RouterConfig checked(RouterConfig cfg);
  // Context parallelism: the load-balancing loss over the cp group's tokens.
  void balance_over_cp(Routing& r) const;

  ContextPtr pc_;
  RouterConfig cfg_;
  Linear linear_;
  std::vector<int64_t> last_counts_;
};

}  // namespace weft::nn
