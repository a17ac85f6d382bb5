// The state the ranks of the local backend (threads of one process) share:
// the world of one run_local call and, per group, the rendezvous slots,
// point-to-point mailboxes and pending splits. Internal to comm/local.cpp.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "weft/comm/detail/op.h"
#include "weft/core/error.h"

namespace weft::comm::detail {

// what() of an exception_ptr's exception.
std::string error_text(const std::exception_ptr& e);

// An error a rank raises because another rank failed or left: the consequence,
// not the cause. run_local rethrows a cause when there is one, whichever rank
// recorded its error first (a subgroup destroyed while its rank's exception
// unwinds lets a peer fail before that rank reaches its handler).
struct PeerFailure : Error {
  using Error::Error;
};

bool is_peer_failure(const std::exception_ptr& e);

struct LocalShared;

// State shared by all rank threads of one run_local call.
struct LocalWorld {
  std::mutex mu;
  std::vector<std::weak_ptr<LocalShared>> groups;
  std::exception_ptr first_error;
  std::string failure;  // "rank 2 failed: ..." once any rank failed

  void add(const std::shared_ptr<LocalShared>& g);
  void abort(int rank, std::exception_ptr error);
};

// State shared by the ranks of one group.
struct LocalShared {
  struct Slot {
    int64_t seq = -1;
    std::vector<Op*> ops;
    int arrived = 0;
    int reduced = 0;  // all_reduce: ranks done with the reduce-scatter phase
    int done = 0;
  };
  struct Posting {
    const Op* op = nullptr;
    bool taken = false;
    bool done = false;
  };
  struct Split {
    std::vector<std::vector<int>> lists;
    std::vector<std::shared_ptr<LocalShared>> groups;
    int taken = 0;
  };

  LocalShared(std::shared_ptr<LocalWorld> w, std::string n, std::vector<int> ranks)
      : world(std::move(w)),
        name(std::move(n)),
        size(static_cast<int>(ranks.size())),
        world_ranks(std::move(ranks)),
        left(static_cast<size_t>(size), false),
        boxes(static_cast<size_t>(size * size)),
        splits_done(static_cast<size_t>(size), 0) {}

  std::shared_ptr<LocalWorld> world;
  std::string name;
  int size;
  std::vector<int> world_ranks;

  std::mutex mu;
  std::condition_variable cv;
  std::string failure;  // set once the group is unusable
  std::vector<bool> left;
  Slot slots[2];
  std::vector<std::deque<Posting*>> boxes;  // [src * size + dst]
  std::map<int64_t, Split> splits;          // by split call number
  std::vector<int64_t> splits_done;         // per rank

  void fail(const std::string& message) {
    if (failure.empty()) failure = message;
    cv.notify_all();
  }

  // "[3]" or "[3] (world ranks [7])".
  std::string ranks_str(const std::vector<int>& ranks) const {
    return detail::ranks_str(ranks, world_ranks);
  }

  std::vector<int> not_arrived(const Slot& s) const {
    std::vector<int> out;
    for (int p = 0; p < size; ++p)
      if (!s.ops[static_cast<size_t>(p)]) out.push_back(p);
    return out;
  }
};

}  // namespace weft::comm::detail
