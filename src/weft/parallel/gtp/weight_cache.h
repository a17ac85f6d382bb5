// WeightCache: the buffers gathered weights and full weight gradients live
// in, handed out by ticket.
//
//   reserve(shape, dtype, use) -> ticket   persistent; no buffer yet
//   get(ticket)                -> buffer   the ticket's buffer: the one it
//                                          holds, else a released buffer of
//                                          the same key, else a new one
//   release(ticket)                        the buffer goes back to its key's
//                                          pool; the ticket stays valid
// Buffers are keyed by shape, dtype and use (forward weight, backward weight,
// gradient): a buffer serves only tickets of its key, and a held buffer is
// never handed to another ticket, so weights whose buffers are both held
// (neighbours in the prefetch chain) never share one. Released buffers stay
// pooled: after the first step, steps allocate nothing. At most
// `max_live_weights` gathered weights (forward and backward buffers) are
// held at once; asking for more is an error (the prefetch chain never does).
// A batch of experts' weights (SourceBatch) is one buffer and counts as one.
// Memory is tagged weight_cache. One cache per model and rank; not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "weft/core/exec_context.h"

namespace weft::parallel::gtp {

enum class Use : uint8_t { forward, backward, gradient };
const char* use_name(Use u);

class WeightCache {
 public:
  using Ticket = int64_t;

  WeightCache(int max_live_weights, ExecContext exec);

  Ticket reserve(const Shape& shape, DType dtype, Use use);
  Tensor get(Ticket ticket);
  void release(Ticket ticket);
  bool held(Ticket ticket) const;

  int max_live_weights() const { return max_live_weights_; }
  // Gathered weights (forward and backward buffers) held now.
  int live_weights() const { return live_weights_; }
  // The most held at once so far.
  int peak_live_weights() const { return peak_live_weights_; }
  // Buffers allocated so far, and the bytes of all of them (held or pooled).
  int64_t buffers() const { return buffers_; }
  int64_t bytes() const { return bytes_; }

 private:
  struct Key {
    std::vector<int64_t> shape;
    DType dtype;
    Use use;
    bool operator<(const Key& o) const {
      return std::tie(shape, dtype, use) < std::tie(o.shape, o.dtype, o.use);
    }
  };
  struct Slot {
    Key key;
    Shape shape;
    Tensor buffer;  // undefined while released
  };

  int max_live_weights_;
  ExecContext exec_;
  std::vector<Slot> slots_;
  std::map<Key, std::vector<Tensor>> pool_;
  int live_weights_ = 0;
  int peak_live_weights_ = 0;
  int64_t buffers_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace weft::parallel::gtp
