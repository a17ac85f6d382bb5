#include "tp_cases.h"

namespace weft::nn::testing {

const std::vector<TpCase>& tp_cases() {
  static const std::vector<TpCase> cases = [] {
    std::vector<TpCase> all;
    for (auto* family : {&linear_cases, &vocab_cases, &layer_cases, &gpt_cases, &quantized_cases}) {
      std::vector<TpCase> more = family();
      all.insert(all.end(), more.begin(), more.end());
    }
    return all;
  }();
  return cases;
}

}  // namespace weft::nn::testing
