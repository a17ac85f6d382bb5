#include "weft/parallel/rng.h"

#include <cmath>
#include <numbers>

#include "weft/kernels/random.h"

namespace weft::parallel {

RngTracker::RngTracker(uint64_t seed, int tp_rank) {
  add(kDefaultStream, seed);
  add(kModelParallelStream, seed + kModelParallelSeedOffset + static_cast<uint64_t>(tp_rank));
}

void RngTracker::add(const std::string& name, uint64_t seed) {
  WEFT_CHECK(!has(name), "random stream '{}' exists already", name);
  streams_[name] = {seed, 0};
}

RngTracker::Stream RngTracker::take(uint64_t count) {
  auto it = streams_.find(current_);
  WEFT_CHECK(it != streams_.end(), "random stream '{}' was never added (seed the tracker first)",
             current_);
  Stream s = it->second;
  it->second.offset += count;
  return s;
}

RngTracker::Fork::Fork(RngTracker& tracker, const std::string& name)
    : tracker_(tracker), previous_(tracker.current_) {
  WEFT_CHECK(tracker.has(name), "cannot fork to random stream '{}': it was never added", name);
  tracker.current_ = name;
}

RngTracker::Fork::~Fork() { tracker_.current_ = previous_; }

void RngTracker::set_state(const State& state) {
  WEFT_CHECK(state.size() == streams_.size(), "random state has {} streams, the tracker {}",
             state.size(), streams_.size());
  for (const auto& [name, stream] : state) {
    WEFT_CHECK(has(name), "random state names stream '{}', which this tracker does not have", name);
  }
  streams_ = state;
}

Tensor normal_init(const Shape& shape, uint64_t seed, const std::string& name, float std) {
  // Key = seed mixed with an FNV-1a hash of the parameter name.
  uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  const uint64_t key = h ^ (seed * 0x9E3779B97F4A7C15ull);
  Tensor t = Tensor::empty(shape, DType::f32);
  float* p = t.data<float>();
  const int64_t n = t.numel();
  // Box-Muller on pairs of uniforms; u1 in (0, 1] keeps the log finite.
  for (int64_t i = 0; i < n; i += 2) {
    std::array<uint32_t, 4> w = kernels::philox_block(key, static_cast<uint64_t>(i) * 2);
    double u1 = 1.0 - kernels::bits_to_uniform(w[0]);
    double u2 = kernels::bits_to_uniform(w[1]);
    double r = std::sqrt(-2.0 * std::log(u1)) * std;
    double a = 2.0 * std::numbers::pi * u2;
    p[i] = static_cast<float>(r * std::cos(a));
    if (i + 1 < n) p[i + 1] = static_cast<float>(r * std::sin(a));
  }
  return t;
}

}  // namespace weft::parallel
