// Where a rank's time goes: seconds accumulated per category on the calling
// thread. GEMM kernels add their time to `gemm`; waits on communication add
// theirs to `comm`; benchmarks read and reset the totals around the work they
// measure ("other" is the rest of the wall time).
#pragma once

#include <chrono>

namespace weft::profile {

// all_to_all: the expert-parallel token exchange of MoE layers (its waits
// count there, not in comm).
enum class Category { gemm, comm, all_to_all };
inline constexpr int kNumCategories = 3;

struct Totals {
  double gemm = 0;
  double comm = 0;
  double all_to_all = 0;
};

// The calling thread's totals since the last reset.
Totals totals();
void reset();
void add(Category c, double seconds);

// Adds the lifetime of the scope to a category.
class Scope {
 public:
  explicit Scope(Category c) : category_(c), start_(std::chrono::steady_clock::now()) {}
  ~Scope() {
    add(category_,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Category category_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace weft::profile
