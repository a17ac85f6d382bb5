#include "synthetic_data.h"

#include <algorithm>

namespace weft {

io::Dataset synthetic_data(const train::TrainConfig& cfg) {
  io::TokenData d;
  d.source = "random tokens";
  const int64_t n = std::max<int64_t>(64 * (cfg.model.seq + 1), 1 << 16);
  uint64_t x = 88172645463325252ull;
  for (int64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    d.tokens.push_back(static_cast<int32_t>(x % static_cast<uint64_t>(cfg.model.vocab)));
  }
  return io::Dataset(std::move(d), cfg.model.seq, 0.1);
}

}  // namespace weft
