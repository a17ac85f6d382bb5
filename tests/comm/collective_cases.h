// The collective test suite, written once as functions of a world: the local
// tests run each case on run_local worlds of 1, 2, 3, 4 and 8 ranks, the MPI
// test binary runs them under mpirun on the mpi backend.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "weft/comm/process_group.h"

namespace weft::comm::testing {

// The world sizes a case means something on (a ring needs two ranks, a
// tp=2 grid an even world).
struct Worlds {
  int min_world = 1;
  int multiple_of = 1;
};

struct CommCase {
  std::string name;
  void (*run)(ProcessGroup& world);
  Worlds worlds{};
  bool runs_on(int n) const { return n >= worlds.min_world && n % worlds.multiple_of == 0; }
};

const std::vector<CommCase>& collective_cases();

inline void PrintTo(const CommCase& c, std::ostream* os) { *os << c.name; }

}  // namespace weft::comm::testing
