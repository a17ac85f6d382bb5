// How many threads a kernel call may use.
//
// Each rank is one caller: under the local backend the ranks are threads of
// one process, so by default the cores are divided among them. The order of
// precedence: set_num_threads() on the calling thread, then the environment
// variable WEFT_NUM_THREADS, then OMP_NUM_THREADS (as torchrun-style launchers
// set it: threads per rank), then cores / ranks_in_process().
#pragma once

namespace weft {

// Threads the calling thread's kernels use.
int num_threads();
// Overrides num_threads() for the calling thread; 0 restores the default.
void set_num_threads(int n);

// Sets num_threads() for the calling thread for a scope, then puts back the
// override that was there (or none).
class ScopedNumThreads {
 public:
  explicit ScopedNumThreads(int n);
  ~ScopedNumThreads();
  ScopedNumThreads(const ScopedNumThreads&) = delete;
  ScopedNumThreads& operator=(const ScopedNumThreads&) = delete;

 private:
  int saved_;
};

// Ranks that share this process's cores: the local backend's rank threads
// while it runs, or under MPI the ranks on this machine.
int ranks_in_process();
void set_ranks_in_process(int n);

// Logical cores available to this process (its CPU affinity mask).
int available_cores();

}  // namespace weft
