#include "weft/infer/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "weft/core/error.h"

namespace weft::infer {

void check(const Sampling& s) {
  WEFT_CHECK(std::isfinite(s.temperature) && s.temperature >= 0.0f,
             "--temperature must be a number >= 0, got {}", s.temperature);
  WEFT_CHECK(s.top_k >= 0, "--top-k must be >= 0 (0: every token), got {}", s.top_k);
  WEFT_CHECK(s.top_p > 0.0f && s.top_p <= 1.0f, "--top-p must lie in (0, 1], got {}", s.top_p);
}

Sampler::Sampler(Sampling sampling, uint64_t seed) : sampling_(sampling), state_(seed) {
  check(sampling_);
}

// splitmix64: a tiny generator whose sequence is fixed for a seed.
double Sampler::uniform() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

int32_t Sampler::next(std::span<const float> logits) {
  const int64_t n = static_cast<int64_t>(logits.size());
  WEFT_CHECK(n > 0, "sampling from an empty vocabulary");
  // A total order (ties by id), so the choice never depends on the sort.
  auto better = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  if (sampling_.temperature == 0.0f) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i) best = better(i, best) ? i : best;
    return best;
  }
  order_.resize(static_cast<size_t>(n));
  std::iota(order_.begin(), order_.end(), 0);
  int64_t k = sampling_.top_k > 0 ? std::min(sampling_.top_k, n) : n;
  std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), better);
  const double top = logits[static_cast<size_t>(order_[0])];
  weight_.resize(static_cast<size_t>(k));
  double sum = 0;
  for (int64_t i = 0; i < k; ++i) {
    const double l = logits[static_cast<size_t>(order_[static_cast<size_t>(i)])];
    sum += weight_[static_cast<size_t>(i)] = std::exp((l - top) / sampling_.temperature);
  }
  if (sampling_.top_p < 1.0f) {
    // The candidates are in order of probability: keep the shortest prefix
    // whose share reaches top_p.
    const double want = static_cast<double>(sampling_.top_p) * sum;
    double kept = 0;
    int64_t m = 0;
    while (m < k && kept < want) kept += weight_[static_cast<size_t>(m++)];
    k = std::max<int64_t>(m, 1);
    sum = kept;
  }
  double u = uniform() * sum;
  for (int64_t i = 0; i < k; ++i) {
    u -= weight_[static_cast<size_t>(i)];
    if (u < 0) return order_[static_cast<size_t>(i)];
  }
  return order_[static_cast<size_t>(k - 1)];
}

}  // namespace weft::infer
