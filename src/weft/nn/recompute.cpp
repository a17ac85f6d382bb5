#include "weft/nn/recompute.h"

#include "weft/core/error.h"

namespace weft::nn {

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "none";
}

Recompute parse_recompute(const std::string& name) {
  if (name == "none") return Recompute::none;
  if (name == "selective") return Recompute::selective;
  if (name == "full") return Recompute::full;
  WEFT_FAIL("unknown recompute mode '{}': use none, selective or full", name);
}

}  // namespace weft::nn
