#include "weft/parallel/gtp/prefetch_chain.h"

#include <algorithm>
#include <chrono>

namespace weft::parallel::gtp {

PrefetchChain::PrefetchChain(int depth) : depth_(depth) {
  WEFT_CHECK(depth >= 0, "the GTP prefetch depth must not be negative, got {}", depth);
}

void PrefetchChain::begin(const PassContext& pass) {
  if (pass.serial() == serial_) return;
  drain();
  serial_ = pass.serial();
  pos_ = -1;
  off_chain_ = false;
  if (frozen_) return;
  // The pass recorded last becomes the chain once it had a backward (a
  // training pass); a forward-only pass is recorded again.
  if (!events_.empty() && recording_backward_) {
    freeze();
  } else {
    events_.clear();
    recording_backward_ = false;
  }
}

void PrefetchChain::freeze() {
  frozen_ = true;
  last_of_source_.assign(events_.size(), false);
  last_gradient_ = -1;
  std::vector<const ChainMember*> seen;
  for (int64_t i = static_cast<int64_t>(events_.size()) - 1; i >= 0; --i) {
    const Event& e = events_[static_cast<size_t>(i)];
    if (e.use != Use::gradient) continue;
    if (last_gradient_ < 0) last_gradient_ = i;
    if (std::find(seen.begin(), seen.end(), e.source) == seen.end()) {
      seen.push_back(e.source);
      last_of_source_[static_cast<size_t>(i)] = true;
    }
  }
}

bool PrefetchChain::advance(const Event& e) {
  ++pos_;
  if (!frozen_) {
    events_.push_back(e);
    recording_backward_ |= e.use == Use::backward;
    return false;
  }
  if (off_chain_) return false;
  if (pos_ < static_cast<int64_t>(events_.size()) && events_[static_cast<size_t>(pos_)] == e) {
    return true;
  }
  off_chain_ = true;
  wait_gathers();
  return false;
}

void PrefetchChain::materialize(ChainMember& source, Use use, const PassContext& pass) {
  begin(pass);
  const Event e{&source, use};
  const bool on_chain = advance(e);
  // The weight materialized before is no longer read: its GEMMs are done.
  release_held();
  comm::Work work;
  if (!in_flight_.empty() && in_flight_.front().event == pos_ && on_chain) {
    work = in_flight_.front().work;
    in_flight_.pop_front();
  } else {
    work = source.gather(use, pass);
    count(source, use);
  }
  held_.push_back(e);
  if (on_chain) prefetch(pass);
  const auto t0 = std::chrono::steady_clock::now();
  work.wait();
  stats_.exposed_gather_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void PrefetchChain::prefetch(const PassContext& pass) {
  int64_t next = in_flight_.empty() ? pos_ : in_flight_.back().event;
  const auto n = static_cast<int64_t>(events_.size());
  while (static_cast<int>(in_flight_.size()) < depth_) {
    do {
      ++next;
    } while (next < n && events_[static_cast<size_t>(next)].use == Use::gradient);
    if (next >= n) return;
    const Event& e = events_[static_cast<size_t>(next)];
    // Evaluation has no backward; a weight already held or in flight shares
    // its buffer (a weight used twice in a row) and is gathered when used.
    if (!pass.training() && e.use == Use::backward) return;
    const auto same = [&](const Gather& g) { return g.what == e; };
    if (std::find(held_.begin(), held_.end(), e) != held_.end() ||
        std::find_if(in_flight_.begin(), in_flight_.end(), same) != in_flight_.end()) {
      return;
    }
    in_flight_.push_back({next, e, e.source->gather(e.use, pass)});
    count(*e.source, e.use);
    ++stats_.prefetched;
  }
}

void PrefetchChain::count(const ChainMember& source, Use use) {
  ++stats_.gathers;
  const int64_t bytes = source.gather_bytes(use), elements = source.shard_elements();
  stats_.gathered_bytes += bytes;
  stats_.gathered_elements += elements;
  if (source.quantized()) {
    stats_.quantized_bytes += bytes;
    stats_.quantized_elements += elements;
  }
}

void PrefetchChain::reduce(ChainMember& source, const PassContext& pass) {
  begin(pass);
  const bool on_chain = advance({&source, Use::gradient});
  complete_reductions();
  Reduction r{.source = &source, .work = {}, .report = Report::later};
  if (source.reduce_scatter(pass, r.work)) {
    ++stats_.reductions;
    if (!on_chain) {
      r.report = Report::at_drain;
    } else if (last_of_source_[static_cast<size_t>(pos_)]) {
      r.report = Report::now;
    }
    pending_.push_back(std::move(r));
  }
  if (!on_chain) {
    // Recording, or off the chain: synchronous; the gradients are reported
    // final at the next drain (the end of the pass is not known here).
    complete_reductions();
  } else if (pos_ == last_gradient_) {
    // The end of backward: nothing is left in flight or held.
    complete_reductions();
    release_held();
  }
}

void PrefetchChain::complete_reductions() {
  std::vector<Reduction> done;
  done.swap(pending_);
  for (Reduction& r : done) {
    r.work.wait();
    r.source->add_reduced();
    if (r.report == Report::now) {
      report(*r.source);
    } else if (r.report == Report::at_drain &&
               std::find(unreported_.begin(), unreported_.end(), r.source) == unreported_.end()) {
      unreported_.push_back(r.source);
    }
  }
}

void PrefetchChain::wait_gathers() {
  std::vector<comm::Work> works;
  for (const Gather& g : in_flight_) works.push_back(g.work);
  std::deque<Gather> gathers;
  gathers.swap(in_flight_);
  comm::wait_all(works);
  for (const Gather& g : gathers) g.what.source->release(g.what.use);
}

void PrefetchChain::release_held() {
  for (const Event& e : held_) e.source->release(e.use);
  held_.clear();
}

void PrefetchChain::drain() {
  wait_gathers();
  release_held();
  complete_reductions();
  report_pending();
}

void PrefetchChain::report(ChainMember& source) {
  if (on_final_) source.each_parameter(on_final_);
}

void PrefetchChain::report_pending() {
  std::vector<ChainMember*> sources;
  sources.swap(unreported_);
  for (ChainMember* s : sources) report(*s);
}

void PrefetchChain::forget(const ChainMember& source) {
  drain();
  const auto is_source = [&](const Event& e) { return e.source == &source; };
  if (std::any_of(events_.begin(), events_.end(), is_source)) {
    events_.clear();
    last_of_source_.clear();
    last_gradient_ = -1;
    frozen_ = false;
    recording_backward_ = false;
    serial_ = 0;
  }
}

}  // namespace weft::parallel::gtp
