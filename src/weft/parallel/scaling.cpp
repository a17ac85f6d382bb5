#include "weft/parallel/scaling.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <unordered_map>

#include "weft/kernels/cast.h"

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

const Tensor& ScalingRegistry::amax_accumulator(Device device) {
  if (!accumulator_.defined() || accumulator_.numel() != size() ||
      !(accumulator_.device() == device)) {
    fold_accumulator();
    accumulator_ = Tensor::zeros({size()}, DType::i32, device, MemoryTag::other);
  }
  return accumulator_;
}

void ScalingRegistry::fold_accumulator() {
  if (!accumulator_.defined()) return;
  const Tensor host = accumulator_.to(Device::cpu());
  const auto* bits = static_cast<const uint32_t*>(host.raw());
  const int64_t n = std::min<int64_t>(host.numel(), size());
  for (int64_t i = 0; i < n; ++i) {
    if (bits[i] != 0) record(static_cast<int>(i), kernels::accumulated_amax(bits[i]));
  }
  accumulator_.zero();
}

void ScalingRegistry::end_step(const Precision& precision, comm::ProcessGroup* group) {
  fold_accumulator();
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
  WEFT_CHECK(s.scales.size() == s.names.size() && s.histories.size() == s.names.size(),
             "the saved FP8 scaling state is inconsistent: {} names, {} scales, {} histories",
             s.names.size(), s.scales.size(), s.histories.size());
  // By name: under expert parallelism another rank's state (another layout's
  // rank 0) holds other experts; an expert this rank now holds that the state
  // lacks starts afresh. Anything else missing is another model.
  std::unordered_map<std::string, size_t> saved;
  for (size_t j = 0; j < s.names.size(); ++j) saved.emplace(s.names[j], j);
  std::vector<size_t> from(states_.size(), SIZE_MAX);
  for (size_t i = 0; i < states_.size(); ++i) {
    if (const auto it = saved.find(names_[i]); it != saved.end()) from[i] = it->second;
    WEFT_CHECK(from[i] != SIZE_MAX || names_[i].find(".experts.") != std::string::npos,
               "the saved FP8 scaling state has no {} (it holds {} tensors, this model {}): "
               "resume with the --precision and model shape the checkpoint was saved with",
               names_[i], s.names.size(), names_.size());
  }
  std::vector<bool> used(s.names.size(), false);
  for (size_t f : from)
    if (f != SIZE_MAX) used[f] = true;
  for (size_t j = 0; j < s.names.size(); ++j) {
    WEFT_CHECK(used[j] || s.names[j].find(".experts.") != std::string::npos,
               "the saved FP8 scaling state holds {}, which this model lacks: resume with the "
               "--precision and model shape the checkpoint was saved with",
               s.names[j]);
  }
  for (size_t i = 0; i < states_.size(); ++i) {
    if (from[i] == SIZE_MAX) continue;
    WEFT_CHECK(s.histories[from[i]].size() == states_[i].amax_history.size(),
               "the saved amax history of {} has {} entries, this run {}: resume with the same "
               "--amax-history",
               names_[i], s.histories[from[i]].size(), states_[i].amax_history.size());
    states_[i].scale = s.scales[from[i]];
    states_[i].amax_history = s.histories[from[i]];
  }
  steps_ = s.steps;
  streams_ = 0;
  if (accumulator_.defined()) accumulator_.zero();  // records before the restore are not the run's
}

}  // namespace weft::parallel
