#include "weft/core/profile.h"

namespace weft::profile {

namespace {
thread_local Totals t_totals;
}  // namespace

Totals totals() { return t_totals; }
void reset() { t_totals = {}; }

void add(Category c, double seconds) {
  if (c == Category::gemm) {
    t_totals.gemm += seconds;
  } else {
    t_totals.comm += seconds;
  }
}

}  // namespace weft::profile
