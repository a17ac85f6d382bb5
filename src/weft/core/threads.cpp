#include "weft/core/threads.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>

#include "weft/core/error.h"

namespace weft {

namespace {
thread_local int t_threads = 0;
std::atomic<int> g_ranks{1};

// A thread count from the environment: WEFT_NUM_THREADS, else the first
// entry of OMP_NUM_THREADS (which OpenMP allows to be a list, "4,2"); 0 when
// neither is set.
int env_threads() {
  static const int value = [] {
    const char* name = "WEFT_NUM_THREADS";
    const char* s = std::getenv(name);
    if (!s || !*s) {
      name = "OMP_NUM_THREADS";
      s = std::getenv(name);
    }
    if (!s || !*s) return 0;
    char* end = nullptr;
    long n = std::strtol(s, &end, 10);
    const bool list = std::string_view(name) == "OMP_NUM_THREADS" && *end == ',';
    WEFT_CHECK((*end == '\0' || list) && n >= 1 && n <= 4096,
               "{}='{}' is not a positive thread count; unset it or give e.g. 4", name, s);
    return static_cast<int>(n);
  }();
  return value;
}
}  // namespace

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

int num_threads() {
  if (t_threads > 0) return t_threads;
  if (int e = env_threads(); e > 0) return e;
  return std::max(1, available_cores() / std::max(1, g_ranks.load()));
}

void set_num_threads(int n) {
  WEFT_CHECK(n >= 0, "thread count must be >= 0 (0 = default), got {}", n);
  t_threads = n;
}

ScopedNumThreads::ScopedNumThreads(int n) : saved_(t_threads) { set_num_threads(n); }

ScopedNumThreads::~ScopedNumThreads() { t_threads = saved_; }

int ranks_in_process() { return g_ranks.load(); }
void set_ranks_in_process(int n) { g_ranks.store(std::max(1, n)); }

}  // namespace weft
