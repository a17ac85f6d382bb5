// The tensor-parallel equivalence suite, written once as functions of a world:
// tp_local_test.cpp runs every case on run_local worlds, tp_mpi_main.cpp under
// mpirun. A case builds a "tp-dp" grid with the given TP size, runs the module
// at that layout, and compares outputs and every gradient with the same module
// at TP=1 (computed on each rank, no communication).
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "weft/comm/process_group.h"

namespace weft::nn::testing {

struct TpCase {
  std::string name;
  std::function<void(comm::ProcessGroup& world, int tp)> run;
};

// Every case of every family below.
const std::vector<TpCase>& tp_cases();

// Families, one per source file.
std::vector<TpCase> linear_cases();     // linear_cases.cpp
std::vector<TpCase> vocab_cases();      // vocab_cases.cpp
std::vector<TpCase> layer_cases();      // layer_cases.cpp
std::vector<TpCase> gpt_cases();        // gpt_cases.cpp
std::vector<TpCase> quantized_cases();  // quantized_cases.cpp

inline void PrintTo(const TpCase& c, std::ostream* os) { *os << c.name; }

}  // namespace weft::nn::testing
