// OpQueue: the worker thread that runs one rank's operations of one group,
// in the order they were issued.
//
// Each operation runs to completion (or failure) before the next one starts;
// its Work is finished right after, so Works complete in issue order. The
// thread starts with the first operation, accounts its allocations to the
// issuing rank's MemoryTracker (tagged `comm`), and on destruction runs what
// is still queued before it exits. A coalesced operation is packed into its
// flat buffer before it runs and unpacked after (detail/op.h), so the
// backend's `execute` sees one ordinary collective.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "weft/comm/detail/host_work.h"
#include "weft/comm/detail/op.h"
#include "weft/core/memory.h"

namespace weft::comm::detail {

class OpQueue {
 public:
  using Execute = std::function<void(Op&)>;
  // For rank `rank` of a group of `size`. `idle` (if given) runs every
  // `idle_period` while the queue is empty.
  OpQueue(int rank, int size, Execute execute, std::chrono::milliseconds idle_period = {},
          std::function<void()> idle = {});
  ~OpQueue();
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  void push(Op op, std::shared_ptr<HostWork> work);

 private:
  void loop();

  int rank_, size_;
  Execute execute_;
  std::chrono::milliseconds idle_period_;
  std::function<void()> idle_;
  MemoryTracker* tracker_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Op, std::shared_ptr<HostWork>>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace weft::comm::detail
