// What the `weft bench …` commands share: timing a callable on the steady
// clock (a device drained around it where one is given), medians and bests of
// rounds, rounds that alternate the measured path with its baseline, the
// slowest rank's time, and the JSON rows of --json.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <vector>

#include "weft/comm/process_group.h"
#include "weft/io/json.h"

namespace weft::bench {

// Seconds one call of `fn` takes, on the steady clock.
template <typename Fn>
double seconds(Fn&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A synchronize callback that waits for nothing (host work ends with its call).
struct NoSync {
  void operator()() const {}
};

// Seconds per call over `iters` calls of `fn` (at least one). `sync` runs
// before and after them, so that work a device has queued is counted: pass
// [&] { ec.synchronize(); } for an ExecContext on a GPU.
template <typename Fn, typename Sync = NoSync>
double seconds_per_call(Fn&& fn, int iters, Sync&& sync = {}) {
  iters = std::max(iters, 1);
  sync();
  return seconds([&] {
           for (int i = 0; i < iters; ++i) fn();
           sync();
         }) /
         iters;
}

// The thread's CPU time so far, in seconds (steadier than wall time on a
// machine shared with other work).
double thread_cpu_seconds();

// The median: the middle sample, the mean of the two middle ones for an even
// count; 0 for none.
double median(std::vector<double> samples);
// The upper of the two middle samples for an even count, the middle one for
// an odd count; 0 for none.
double upper_median(std::vector<double> samples);
// The fastest sample; +infinity for none.
double best(const std::vector<double>& samples);

// The order of the steps within a round: as given every round (fixed), or
// starting one step further each round (rotating: round r begins with step
// r mod n), so that neither the order nor a slow spell of a shared machine
// favours one of them.
enum class Order { fixed, rotating };

// Runs `rounds` rounds; each calls `before_round` (where given), then every
// one of `steps` once, in `order`.
void in_rounds(int64_t rounds, const std::vector<std::function<void()>>& steps,
               Order order = Order::fixed, const std::function<void()>& before_round = {});

// Measurements taken in alternating rounds (as in_rounds): each of `measure`
// returns one sample (seconds) a round; the result holds measurement i's
// samples at [i].
std::vector<std::vector<double>> alternate(int64_t rounds,
                                           const std::vector<std::function<double()>>& measure,
                                           Order order = Order::fixed,
                                           const std::function<void()>& before_round = {});

// `value` of every rank of `g` reduced with `op` (max: the slowest rank's
// time; sum: a count over the ranks), on every rank.
double across_ranks(comm::ProcessGroup& g, double value, comm::ReduceOp op);
// Seconds one call of `fn` takes on the slowest rank of `g`, the ranks
// starting together (after a barrier).
double slowest_rank_seconds(comm::ProcessGroup& g, const std::function<void()>& fn);

// One JSON object on a line of stdout, flushed.
void print_json(const io::Json& row);
// Where a bench writes its lines about the machine: stderr under --json (so
// that stdout holds only the JSON rows), stdout otherwise.
std::ostream& info_stream(bool json);

}  // namespace weft::bench
