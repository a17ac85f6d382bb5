#include "weft/core/profile.h"

namespace weft::profile {

namespace {
thread_local Totals t_totals;
}  // namespace

Totals totals() { return t_totals; }
void reset() { t_totals = {}; }

void add(Category c, double seconds) {
  switch (c) {
    case Category::gemm: t_totals.gemm += seconds; break;
    case Category::comm: t_totals.comm += seconds; break;
    case Category::all_to_all: t_totals.all_to_all += seconds; break;
  }
}

}  // namespace weft::profile
