#include "timing.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <limits>

#include "weft/core/tensor.h"

namespace weft::bench {

double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const size_t h = samples.size() / 2;
  return samples.size() % 2 ? samples[h] : 0.5 * (samples[h - 1] + samples[h]);
}

double upper_median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

double best(const std::vector<double>& samples) {
  double b = std::numeric_limits<double>::infinity();
  for (double s : samples) b = std::min(b, s);
  return b;
}

void in_rounds(int64_t rounds, const std::vector<std::function<void()>>& steps, Order order,
               const std::function<void()>& before_round) {
  const size_t n = steps.size();
  for (int64_t round = 0; round < rounds && n > 0; ++round) {
    if (before_round) before_round();
    const size_t first = order == Order::rotating ? static_cast<size_t>(round) % n : 0;
    for (size_t step = 0; step < n; ++step) steps[(first + step) % n]();
  }
}

std::vector<std::vector<double>> alternate(int64_t rounds,
                                           const std::vector<std::function<double()>>& measure,
                                           Order order, const std::function<void()>& before_round) {
  std::vector<std::vector<double>> samples(measure.size());
  std::vector<std::function<void()>> steps;
  for (size_t i = 0; i < measure.size(); ++i)
    steps.emplace_back([&, i] { samples[i].push_back(measure[i]()); });
  in_rounds(rounds, steps, order, before_round);
  return samples;
}

double across_ranks(comm::ProcessGroup& g, double value, comm::ReduceOp op) {
  Tensor t = Tensor::full({1}, static_cast<float>(value));
  g.all_reduce(t, op).wait();
  return t.item(0);
}

double slowest_rank_seconds(comm::ProcessGroup& g, const std::function<void()>& fn) {
  g.barrier().wait();
  return across_ranks(g, seconds(fn), comm::ReduceOp::max);
}

void print_json(const io::Json& row) {
  std::cout << row.dump() << "\n";
  std::cout.flush();
}

std::ostream& info_stream(bool json) { return json ? std::cerr : std::cout; }

}  // namespace weft::bench
