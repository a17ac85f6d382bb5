// LrSchedule: linear warmup, then cosine decay to a floor.
//
// With peak `lr`, warmup W, total T and floor m (default lr/10), define on
// x in [0, T]
//   f(x) = lr · x / W                                         for x <= W
//   f(x) = m + (lr − m) · ½ · (1 + cos(π · (x − W) / (T − W)))  for W < x <= T
//   f(x) = m                                                   for x > T
// so f rises linearly from f(0) = 0 to f(W) = lr and falls along a half cosine
// to f(T) = m. Optimizer step s (counted from 0) uses at(s) = f(s + 1): the
// first step already moves (lr/W, never a wasted step at 0), step W−1 runs at
// the peak and the last step T−1 at exactly m. Values are computed in double.
#pragma once

#include <cstdint>
#include <optional>

namespace weft::train {

struct LrSchedule {
  double lr = 3e-4;                   // peak learning rate
  int64_t warmup = 0;                 // W: steps of linear warmup
  int64_t total = 1;                  // T: steps of the whole run
  std::optional<double> min_lr = {};  // m: floor of the decay; lr/10 when unset

  // Checks lr > 0, 0 <= m <= lr, T >= 1, 0 <= W <= T; the messages name the
  // --lr, --warmup and --steps options.
  void validate() const;
  double floor() const { return min_lr ? *min_lr : lr / 10; }
  // The learning rate of optimizer step `step` (0-based): f(step + 1).
  double at(int64_t step) const;
};

}  // namespace weft::train
