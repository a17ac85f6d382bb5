// PassContext: what one forward/backward pass (one microbatch) shares with
// the parallel layer — the random streams, whether it trains, and whether
// weights are known unchanged since the previous pass. nn::Ctx is one.
#pragma once

#include "weft/parallel/rng.h"

namespace weft::parallel {

class PassContext {
 public:
  explicit PassContext(RngTracker* rng = nullptr, bool training = true)
      : rng_(rng), training_(training) {}

  bool training() const { return training_; }
  RngTracker* rng() const { return rng_; }

  // The passes of one optimizer step (its microbatches) see the same weights:
  // a trainer sets this so a weight source casts each weight once per step
  // (it still recasts when a Parameter's version changed). Off by default, so
  // that code writing weights directly between passes always sees them.
  bool reuse_weight_casts() const { return reuse_weight_casts_; }
  void set_reuse_weight_casts(bool on) { reuse_weight_casts_ = on; }

 private:
  RngTracker* rng_;
  bool training_;
  bool reuse_weight_casts_ = false;
};

}  // namespace weft::parallel
