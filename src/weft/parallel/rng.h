// RngTracker: named random streams for dropout, and TP-invariant initialization.
//
// A stream is a Philox seed plus an offset that advances by the numbers each
// kernel consumes, so a run is reproducible and its state is two integers per
// stream (saved in checkpoints). Streams (Megatron's convention):
//   "default"         seeded `seed`: dropout on activations every TP rank holds
//                     in full, so the ranks of a TP group draw the same masks;
//   "model-parallel"  seeded `seed + 2718 + tp_rank`: dropout inside a TP
//                     region (attention probabilities), different per shard.
// fork(name) makes a stream current until the returned scope ends.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "weft/core/tensor.h"

namespace weft::parallel {

inline constexpr const char* kDefaultStream = "default";
inline constexpr const char* kModelParallelStream = "model-parallel";
inline constexpr uint64_t kModelParallelSeedOffset = 2718;

class RngTracker {
 public:
  struct Stream {
    uint64_t seed = 0;
    uint64_t offset = 0;
    friend bool operator==(const Stream&, const Stream&) = default;
  };
  using State = std::map<std::string, Stream>;

  RngTracker() = default;
  // Sets up "default" and "model-parallel" for a rank at `tp_rank`.
  RngTracker(uint64_t seed, int tp_rank);

  // Adds a stream; a name that exists already is an error.
  void add(const std::string& name, uint64_t seed);
  bool has(const std::string& name) const { return streams_.count(name) > 0; }
  const std::string& current() const { return current_; }

  // Reserves `count` numbers of the current stream: returns the (seed, offset)
  // a kernel should use and advances the stream past them.
  Stream take(uint64_t count);

  class Fork {
   public:
    Fork(RngTracker& tracker, const std::string& name);
    ~Fork();
    Fork(const Fork&) = delete;
    Fork& operator=(const Fork&) = delete;

   private:
    RngTracker& tracker_;
    std::string previous_;
  };
  // Makes `name` current for the lifetime of the returned scope.
  [[nodiscard]] Fork fork(const std::string& name = kModelParallelStream) {
    return Fork(*this, name);
  }

  State state() const { return streams_; }
  // Restores every stream of a saved state; the names must match.
  void set_state(const State& state);

 private:
  std::map<std::string, Stream> streams_;
  std::string current_ = kDefaultStream;
};

// A full tensor of `shape` with values N(0, std²) from a Philox stream keyed by
// (seed, name): the same on every rank and for every parallel layout, so each
// rank can generate the full master weight and keep its slice.
Tensor normal_init(const Shape& shape, uint64_t seed, const std::string& name, float std);

}  // namespace weft::parallel
