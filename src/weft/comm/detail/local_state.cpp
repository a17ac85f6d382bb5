#include "weft/comm/detail/local_state.h"

#include "weft/comm/detail/op_queue.h"

namespace weft::comm::detail {

std::string error_text(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

bool is_peer_failure(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const PeerFailure&) {
    return true;
  } catch (...) {
    return false;
  }
}

void LocalWorld::add(const std::shared_ptr<LocalShared>& g) {
  std::lock_guard lock(mu);
  groups.push_back(g);
  if (!failure.empty()) {
    std::lock_guard glock(g->mu);
    g->fail(failure);
  }
}

void LocalWorld::abort(int rank, std::exception_ptr error) {
  std::vector<std::shared_ptr<LocalShared>> live;
  {
    std::lock_guard lock(mu);
    if (!first_error) {
      first_error = error;
      failure = format("rank {} failed: {}", rank, error_text(error));
    } else if (is_peer_failure(first_error) && !is_peer_failure(error)) {
      first_error = error;
    }
    for (auto& w : groups)
      if (auto g = w.lock()) live.push_back(std::move(g));
  }
  for (auto& g : live) {
    std::lock_guard glock(g->mu);
    g->fail(failure);
  }
}

}  // namespace weft::comm::detail
