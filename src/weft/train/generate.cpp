#include "weft/train/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "weft/parallel/mappings.h"

namespace weft::train {

namespace {

// splitmix64: a tiny generator whose sequence is fixed for a seed on every
// platform (std:: distributions are not).
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
};

// Logits over the real vocabulary at the last position of `window`.
std::vector<float> next_logits(nn::Gpt& model, std::span<const int32_t> window) {
  const nn::GptConfig& cfg = model.config();
  const parallel::ParallelContext& pc = *model.context();
  const int tp = pc.tp_size();
  const int64_t len = static_cast<int64_t>(window.size());
  // Sequence parallelism splits the sequence evenly: pad on the right, which
  // causal attention never lets the earlier positions see.
  int64_t padded = len;
  if (pc.sp == nn::SequenceParallel::seq) padded = (len + tp - 1) / tp * tp;
  std::vector<int32_t> ids(static_cast<size_t>(padded), 0);
  std::copy(window.begin(), window.end(), ids.begin());
  nn::Ctx ctx(nullptr, false);
  // (G, padded, Vp/tp): G is the group's batch, tp copies of the prompt under --sp batch.
  Tensor logits = model.forward(ctx, Tensor::from_i32({1, padded}, ids));
  // The vocabulary is split over the TP ranks along the last dimension.
  const Tensor row = logits.rows(len - 1, 1).to(DType::f32);
  const Tensor full =
      parallel::forward(pc.exec, parallel::Mapping::gather_from_tp, pc.tp.get(), row);
  std::vector<float> v = full.to_vector();
  v.resize(static_cast<size_t>(cfg.vocab));
  return v;
}

int32_t pick(const std::vector<float>& logits, const SampleOptions& o, Random& rng) {
  const int64_t n = static_cast<int64_t>(logits.size());
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  // A total order (ties by id), so the choice never depends on the sort.
  auto better = [&](int32_t a, int32_t b) {
    float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  if (o.temperature == 0.0f) return *std::min_element(order.begin(), order.end(), better);
  const int64_t k = o.top_k > 0 ? std::min(o.top_k, n) : n;
  std::partial_sort(order.begin(), order.begin() + k, order.end(), better);
  const double top = logits[static_cast<size_t>(order[0])];
  std::vector<double> p(static_cast<size_t>(k));
  double sum = 0;
  for (int64_t i = 0; i < k; ++i) {
    double l = logits[static_cast<size_t>(order[static_cast<size_t>(i)])];
    sum += p[static_cast<size_t>(i)] = std::exp((l - top) / o.temperature);
  }
  double u = rng.uniform() * sum;
  for (int64_t i = 0; i < k; ++i) {
    u -= p[static_cast<size_t>(i)];
    if (u < 0) return order[static_cast<size_t>(i)];
  }
  return order[static_cast<size_t>(k - 1)];
}

}  // namespace

std::vector<int32_t> generate(nn::Gpt& model, const std::vector<int32_t>& prompt,
                              const SampleOptions& options) {
  const nn::GptConfig& cfg = model.config();
  WEFT_CHECK(!prompt.empty(), "the prompt is empty: give at least one token");
  for (size_t i = 0; i < prompt.size(); ++i) {
    WEFT_CHECK(prompt[i] >= 0 && prompt[i] < cfg.vocab,
               "prompt token {} (at position {}) is outside the model's vocabulary of {}",
               prompt[i], i, cfg.vocab);
  }
  WEFT_CHECK(std::isfinite(options.temperature) && options.temperature >= 0.0f,
             "--temperature must be a number >= 0, got {}", options.temperature);
  WEFT_CHECK(options.tokens >= 0 && options.top_k >= 0, "--tokens and --top-k must be >= 0");
  Random rng(options.seed);
  std::vector<int32_t> context = prompt, out;
  for (int64_t i = 0; i < options.tokens; ++i) {
    const size_t len = std::min(context.size(), static_cast<size_t>(cfg.seq));
    std::span<const int32_t> window(context.data() + context.size() - len, len);
    int32_t next = pick(next_logits(model, window), options, rng);
    context.push_back(next);
    out.push_back(next);
  }
  return out;
}

std::string valid_utf8(std::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
    if (ok && n > 1) {
      // Reject overlong forms, surrogates and code points above U+10FFFF.
      uint32_t cp = c & (0x7f >> n);
      for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
      const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
      ok = cp >= min[n] && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
    }
    if (ok) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
  }
  return out;
}

}  // namespace weft::train
