// PrefetchChain: the order in which a model's GTP weights are used, and the
// all-gathers and reduce-scatters run along it.
//
// Recording. The first training pass (forward and backward of a microbatch)
// runs every collective synchronously and records its events: each weight
// materialized for forward, each materialized for backward, each gradient
// finalized, in the order they happen (backward walks the layers in reverse,
// so the chain does too). From the next pass on the chain is fixed.
//
// Prefetch. Materializing event i waits for its all-gather (the chain head's,
// the first of a pass, is issued then and there: the weights changed in the
// optimizer step before it) and issues the all-gathers of the next
// materializations, so that layer i+1's gather is in flight while layer i
// computes. `depth` gathers are in flight behind the weight the GEMMs read,
// so the weight cache holds at most depth + 1 gathered weights; the weight
// materialized before is released first (its GEMMs are done). Evaluation
// passes (not training) prefetch forward weights only.
//
// Deferred reduce-scatter. Finalizing a gradient issues its reduce-scatter;
// the reduce-scatters issued before are completed then (waited for, added
// into their shards' gradients): the next layer's backward waits for the
// previous layer's reduction, which overlapped its GEMMs. The pass's last
// gradient event (the end of backward) completes all of them, as drain()
// does. A shard's gradient is final for the pass once its last reduction is
// added in: then `on_gradient_final` is called with it (data-parallel
// gradient sync may start).
//
// A pass whose events leave the recorded order (another model shape, a
// partial pass) runs synchronously from there on, and a new pass starts
// with every collective of the previous one completed.
//
// An event's member is one sharded weight (ShardedWeightSource) or a batch
// of them (SourceBatch: a GroupedLinear's local experts), gathered by one
// collective and reduced by one: the chain treats a batch as one weight.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "weft/comm/work.h"
#include "weft/parallel/gtp/weight_cache.h"
#include "weft/parallel/parameter.h"
#include "weft/parallel/pass.h"

namespace weft::parallel::gtp {

// What one event of the chain gathers and reduces: the collectives a
// member issues and completes, and what they cost.
class ChainMember {
 public:
  virtual ~ChainMember() = default;
  // Issues the all-gather of `use` (forward or backward) for `pass` into a
  // weight-cache buffer the member holds until release(use).
  virtual comm::Work gather(Use use, const PassContext& pass) = 0;
  virtual void release(Use use) = 0;
  // Bytes this rank sent in its latest gather of `use`, the elements of its
  // shards (padding included) and whether they travel quantized.
  virtual int64_t gather_bytes(Use use) const = 0;
  virtual int64_t shard_elements() const = 0;
  virtual bool quantized() const = 0;
  // Issues the reduce-scatter of this pass's gradient; false when there is
  // nothing to reduce in this pass (full-gradient accumulation before the
  // last microbatch).
  virtual bool reduce_scatter(const PassContext& pass, comm::Work& work) = 0;
  // After the reduce-scatter: adds the reduced rows into the shards'
  // gradients and frees the buffer for the next pass.
  virtual void add_reduced() = 0;
  // Calls f with each parameter whose gradient the member's reductions make.
  virtual void each_parameter(const std::function<void(Parameter&)>& f) = 0;
};

class PrefetchChain {
 public:
  explicit PrefetchChain(int depth);
  PrefetchChain(const PrefetchChain&) = delete;
  PrefetchChain& operator=(const PrefetchChain&) = delete;

  // Gathers `source`'s weight for `use` (forward or backward) in `pass`:
  // when this returns, the member's buffer of `use` holds it.
  void materialize(ChainMember& source, Use use, const PassContext& pass);
  // `source`'s gradient of `pass` is in its buffer: completes the reductions
  // issued before, then issues this one.
  void reduce(ChainMember& source, const PassContext& pass);
  // Completes the reductions issued so far (before a buffer is reused).
  void complete_reductions();
  // Waits for every collective in flight, completes every reduction,
  // releases every buffer and reports the gradients that became final.
  void drain();
  // `source` is going away: drains, and records anew if it was on the chain.
  void forget(const ChainMember& source);

  void set_on_gradient_final(std::function<void(Parameter&)> f) { on_final_ = std::move(f); }

  struct Event {
    ChainMember* source = nullptr;
    Use use = Use::forward;
    bool operator==(const Event&) const = default;
  };
  // Whether the chain is fixed, and its events (the recorded pass's).
  bool recorded() const { return frozen_; }
  const std::vector<Event>& events() const { return events_; }

  struct Stats {
    int64_t gathers = 0;          // all-gathers issued (a batch's is one)
    int64_t prefetched = 0;       // of them, issued ahead of their use
    int64_t reductions = 0;       // reduce-scatters issued (a batch's is one)
    double exposed_gather_s = 0;  // time materializations waited for all-gathers
    // What this rank sent in its all-gathers (data and scales; quantized
    // gathers count their per-tensor scale) and the elements of its shards,
    // over all gathers and over the quantized ones (the Linear weights under
    // a quantized recipe; the embedding stays in high precision): their
    // ratio is the bytes moved per weight element (f32 4, bf16 2, FP8 ≈ 1,
    // MXFP8 ≈ 1 + 1/32, NVFP4 ≈ 0.5 + 1/256).
    int64_t gathered_bytes = 0, gathered_elements = 0;
    int64_t quantized_bytes = 0, quantized_elements = 0;
    double bytes_per_element() const { return ratio(gathered_bytes, gathered_elements); }
    double quantized_bytes_per_element() const {
      return ratio(quantized_bytes, quantized_elements);
    }
    static double ratio(int64_t bytes, int64_t elements) {
      return elements > 0 ? static_cast<double>(bytes) / static_cast<double>(elements) : 0.0;
    }
  };
  const Stats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  // How a reduction's completion reports its shard's gradient as final.
  enum class Report : uint8_t { now, at_drain, later };
  struct Gather {
    int64_t event = 0;
    Event what;
    comm::Work work;
  };
  struct Reduction {
    ChainMember* source = nullptr;
    comm::Work work;
    Report report = Report::later;
  };

  // A pass other than the current one: drains and records, or fixes the chain.
  void begin(const PassContext& pass);
  // Advances to the pass's next event; true when it is the recorded one
  // (prefetching and deferring apply).
  bool advance(const Event& e);
  void freeze();
  void prefetch(const PassContext& pass);
  void count(const ChainMember& source, Use use);
  void wait_gathers();
  void release_held();
  void report(ChainMember& source);
  void report_pending();

  int depth_;
  std::vector<Event> events_;
  std::vector<bool> last_of_source_;  // per gradient event: the source's last in the pass
  int64_t last_gradient_ = -1;        // the pass's last gradient event
  bool frozen_ = false;
  bool recording_backward_ = false;       // the pass being recorded has backward events
  uint64_t serial_ = 0;                   // the current pass
  int64_t pos_ = -1;                      // its latest event
  bool off_chain_ = false;                // it left the recorded order
  std::deque<Gather> in_flight_;          // prefetched gathers, in chain order
  std::vector<Event> held_;               // the weight the GEMMs read (at most one)
  std::vector<Reduction> pending_;        // issued reduce-scatters, oldest first
  std::vector<ChainMember*> unreported_;  // final at the next drain
  std::function<void(Parameter&)> on_final_;
  Stats stats_;
};

}  // namespace weft::parallel::gtp
