// PassContext: what one forward/backward pass (one microbatch) shares with
// the parallel layer — the random streams, whether it trains, whether
// weights are known unchanged since the previous pass and whether its
// gradients complete the optimizer step's. nn::Ctx is one.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "weft/parallel/rng.h"

namespace weft::parallel {

class PassContext {
 public:
  explicit PassContext(RngTracker* rng = nullptr, bool training = true)
      : rng_(rng), training_(training), serial_(next_serial()) {}

  bool training() const { return training_; }
  RngTracker* rng() const { return rng_; }
  // Distinct for every pass of the process: weight sources that follow the
  // passes (generalized tensor parallelism's prefetch chain) tell a new pass by it.
  uint64_t serial() const { return serial_; }

  // The passes of one optimizer step (its microbatches) see the same weights:
  // a trainer sets this so a weight source casts each weight once per step
  // (it still recasts when a Parameter's version changed). Off by default, so
  // that code writing weights directly between passes always sees them.
  bool reuse_weight_casts() const { return reuse_weight_casts_; }
  void set_reuse_weight_casts(bool on) { reuse_weight_casts_ = on; }

  // Whether this pass's gradients complete the optimizer step's (the last
  // microbatch of a gradient accumulation; every pass by default). A weight
  // source that reduces its gradient once a step does it in this pass.
  bool final_microbatch() const { return final_microbatch_; }
  void set_final_microbatch(bool on) { final_microbatch_ = on; }

  // Whether this pass is the first of the optimizer step's (its first
  // micro-batch): a layer whose weight gradient is the parameter's own may
  // write it instead of adding to it (Parameter::grad_overwritten), so the
  // trainer skips zeroing it. Off by default: backward accumulates.
  bool first_microbatch() const { return first_microbatch_; }
  void set_first_microbatch(bool on) { first_microbatch_ = on; }

  // Whether the forward running now recomputes one that already ran in this
  // pass (activation recomputation, nn/recompute.h): it must give the same
  // results and record nothing twice (fp8-delayed's amaxes).
  bool recomputing() const { return recomputing_; }
  void set_recomputing(bool on) { recomputing_ = on; }

  // A split backward (zero-bubble pipelines): with this on, a module may
  // queue its weight-gradient work (Linear's wgrad GEMM, on copies of its
  // operands) instead of running it, and the pass's backward computes the
  // input gradient alone; run_deferred_weight_grads() runs the queue later,
  // in order. Off by default: a backward computes both.
  bool defer_weight_grads() const { return defer_weight_grads_; }
  void set_defer_weight_grads(bool on) { defer_weight_grads_ = on; }
  void defer_weight_grad(std::function<void()> work) { deferred_.push_back(std::move(work)); }
  void run_deferred_weight_grads() {
    std::vector<std::function<void()>> work = std::move(deferred_);
    deferred_.clear();
    for (auto& w : work) w();
  }

 private:
  static uint64_t next_serial() {
    static std::atomic<uint64_t> counter{0};
    return ++counter;
  }

  RngTracker* rng_;
  bool training_;
  uint64_t serial_;
  bool reuse_weight_casts_ = false;
  bool final_microbatch_ = true;
  bool recomputing_ = false;
  bool first_microbatch_ = false;
  bool defer_weight_grads_ = false;
  std::vector<std::function<void()>> deferred_;
};

}  // namespace weft::parallel
