#include "weft/io/scaling_state.h"

#include <bit>
#include <limits>

#include "weft/io/checkpoint_format.h"

namespace weft::io {

namespace {

Json bits(float f) { return Json(static_cast<int64_t>(std::bit_cast<uint32_t>(f))); }

float from_bits(const Json& j, const std::string& what) {
  WEFT_CHECK(
      j.is_integer() && j.as_int() >= 0 && j.as_int() <= std::numeric_limits<uint32_t>::max(),
      "{}: expected the bits of an f32, got {}", what, j.dump());
  return std::bit_cast<float>(static_cast<uint32_t>(j.as_int()));
}

}  // namespace

Json scaling_json(const parallel::ScalingRegistry::Snapshot& s) {
  Json out = Json::object();
  out["steps"] = u64_json(s.steps);
  Json tensors = Json::array();
  for (size_t i = 0; i < s.names.size(); ++i) {
    Json t = Json::object();
    t["name"] = s.names[i];
    t["scale"] = bits(s.scales[i]);
    Json h = Json::array();
    for (float a : s.histories[i]) h.push_back(bits(a));
    t["amax_history"] = std::move(h);
    tensors.push_back(std::move(t));
  }
  out["tensors"] = std::move(tensors);
  return out;
}

parallel::ScalingRegistry::Snapshot scaling_from_json(const Json& j, const std::string& what) {
  WEFT_CHECK(j.is_object() && j.find("steps") && j.find("tensors") && j.at("tensors").is_array(),
             "{}: the scaling state needs \"steps\" and a \"tensors\" array", what);
  parallel::ScalingRegistry::Snapshot s;
  s.steps = json_u64(j.at("steps"), what + " steps");
  for (const Json& t : j.at("tensors").as_array()) {
    WEFT_CHECK(t.is_object() && t.find("name") && t.at("name").is_string() && t.find("scale") &&
                   t.find("amax_history") && t.at("amax_history").is_array(),
               "{}: each tensor needs a name, a scale and an amax_history", what);
    s.names.push_back(t.at("name").as_string());
    s.scales.push_back(from_bits(t.at("scale"), what));
    std::vector<float> h;
    for (const Json& a : t.at("amax_history").as_array()) h.push_back(from_bits(a, what));
    s.histories.push_back(std::move(h));
  }
  return s;
}

}  // namespace weft::io
