#include "weft/parallel/pipeline/stages.h"

#include <charconv>

#include "weft/core/error.h"

namespace weft::parallel::pipeline {

namespace {

std::vector<int64_t> parse_counts(const std::string& text) {
  std::vector<int64_t> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    int64_t v = 0;
    const char* first = text.data() + at;
    const char* last = text.data() + comma;
    const auto [end, ec] = std::from_chars(first, last, v);
    WEFT_CHECK(ec == std::errc() && end == last && v >= 1,
               "--pp-layers {}: '{}' is not a layer count; give one count of at least 1 per "
               "stage, separated by commas (3,5,5,3)",
               text, std::string(first, last));
    out.push_back(v);
    at = comma + 1;
  }
  return out;
}

}  // namespace

std::vector<int64_t> split_layers(int64_t layers, int ranks, int virtual_stages,
                                  const std::string& counts, bool interleaved) {
  // 64 bits: --pp and --vpp come from the user, their product may not fit an int.
  const int64_t stages = int64_t{ranks} * virtual_stages;
  const std::string stages_named =
      virtual_stages > 1 ? format("--pp {} x --vpp {} = {} stages", ranks, virtual_stages, stages)
                         : format("--pp {} stages", ranks);
  WEFT_CHECK(stages <= layers,
             "{} is more than the model's {} layers (--layers): each stage needs at least one "
             "layer; use at most {} stages",
             stages_named, layers, layers);
  const int S = static_cast<int>(stages);
  if (!counts.empty()) {
    const std::vector<int64_t> c = parse_counts(counts);
    WEFT_CHECK(static_cast<int>(c.size()) == S,
               "--pp-layers {} gives {} stages, {}: give {} counts", counts, c.size(), stages_named,
               S);
    int64_t sum = 0;
    for (int64_t v : c) {
      WEFT_CHECK(v <= layers,
                 "--pp-layers {}: a stage of {} layers is more than the model's {} (--layers)",
                 counts, v, layers);
      sum += v;
    }
    WEFT_CHECK(sum == layers,
               "--pp-layers {} sums to {} layers, the model has {} (--layers): give {} counts "
               "that sum to {}",
               counts, sum, layers, S, layers);
    return c;
  }
  if (interleaved) {
    WEFT_CHECK(layers % S == 0,
               "--pp-schedule interleaved splits the model's {} layers into {} of equal size, "
               "and {} does not divide {}: choose --pp and --vpp whose product divides {} (or "
               "give --pp-layers)",
               layers, stages_named, S, layers, layers);
    return std::vector<int64_t>(static_cast<size_t>(S), layers / S);
  }
  // The embedding and the head count as a layer each.
  std::vector<int64_t> out(static_cast<size_t>(S));
  const int64_t units = layers + (S > 1 ? 2 : 0);
  for (int s = 0; s < S; ++s) {
    // Stages in the middle take the remainder: the ends hold the extra work.
    const int64_t extra = units % S;
    const int from = (S - static_cast<int>(extra)) / 2;
    out[s] = units / S + (s >= from && s < from + extra ? 1 : 0);
  }
  if (S > 1) {
    out.front() -= 1;
    out.back() -= 1;
  }
  bool ok = true;
  for (int64_t v : out) ok = ok && v >= 1;
  if (!ok) {
    // Too few layers to give the ends one less: an even split.
    for (int s = 0; s < S; ++s) out[s] = layers / S + (s < layers % S ? 1 : 0);
  }
  return out;
}

std::vector<int64_t> layer_boundaries(const std::vector<int64_t>& counts) {
  std::vector<int64_t> b{0};
  for (int64_t c : counts) b.push_back(b.back() + c);
  return b;
}

}  // namespace weft::parallel::pipeline
