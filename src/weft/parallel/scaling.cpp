#include "weft/parallel/scaling.h"

#include <cfloat>
#include <cmath>

namespace weft::parallel {

float scale_from_amax(float amax, float fp8_max, int margin, float previous) {
  if (!std::isfinite(amax) || amax <= 0.0f) return previous;
  float scale = fp8_max / amax / std::ldexp(1.0f, margin);
  if (std::isinf(scale)) scale = FLT_MAX;
  return scale;
}

int ScalingRegistry::add(const std::string& name, float fp8_max, int history) {
  WEFT_CHECK(history >= 1, "{}: the amax history needs at least one entry, got {}", name, history);
  names_.push_back(name);
  DelayedScalingState s;
  s.amax_history.assign(static_cast<size_t>(history), 0.0f);
  s.fp8_max = fp8_max;
  states_.push_back(std::move(s));
  return size() - 1;
}

void ScalingRegistry::record(int id, float amax) {
  float& slot = states_[static_cast<size_t>(id)].amax_history[0];
  slot = std::fmax(slot, amax);
}

void ScalingRegistry::end_step(const Precision& precision, comm::ProcessGroup* group) {
  if (!states_.empty() && group && group->size() > 1) {
    // One collective over every tensor's current amax.
    Tensor current = Tensor::empty({size()});
    float* c = current.data<float>();
    for (size_t i = 0; i < states_.size(); ++i) c[i] = states_[i].amax_history[0];
    const Tensor list[] = {current};
    group->all_reduce_coalesced(list, comm::ReduceOp::max).wait();
    for (size_t i = 0; i < states_.size(); ++i) states_[i].amax_history[0] = c[i];
  }
  for (DelayedScalingState& s : states_) {
    std::vector<float>& h = s.amax_history;
    float amax = h[0];
    if (precision.amax_algo == AmaxAlgo::max) {
      for (float a : h) amax = std::fmax(amax, a);
    }
    s.scale = scale_from_amax(amax, s.fp8_max, precision.margin, s.scale);
    const float latest = h[0];
    for (size_t i = 1; i + 1 < h.size(); ++i) h[i] = h[i + 1];
    if (h.size() > 1) h.back() = latest;
    h[0] = 0.0f;
  }
  ++steps_;
  streams_ = 0;
}

ScalingRegistry::Snapshot ScalingRegistry::snapshot() const {
  Snapshot s;
  s.steps = steps_;
  s.names = names_;
  for (const DelayedScalingState& st : states_) {
    s.scales.push_back(st.scale);
    s.histories.push_back(st.amax_history);
  }
  return s;
}

void ScalingRegistry::restore(const Snapshot& s) {
  WEFT_CHECK(s.names == names_ && s.scales.size() == states_.size() &&
                 s.histories.size() == states_.size(),
             "the saved FP8 scaling state holds {} tensors, this model {}: resume with the "
             "--precision and model shape the checkpoint was saved with",
             s.names.size(), names_.size());
  for (size_t i = 0; i < states_.size(); ++i) {
    WEFT_CHECK(s.histories[i].size() == states_[i].amax_history.size(),
               "the saved amax history of {} has {} entries, this run {}: resume with the same "
               "--amax-history",
               names_[i], s.histories[i].size(), states_[i].amax_history.size());
    states_[i].scale = s.scales[i];
    states_[i].amax_history = s.histories[i];
  }
  steps_ = s.steps;
  streams_ = 0;
}

}  // namespace weft::parallel
