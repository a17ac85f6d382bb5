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
#include "weft/nn/gpt.h"
#include "weft/parallel/gtp/options.h"

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

// Token ids in [0, vocab) of `shape` from a fixed seed (gpt_cases.cpp).
Tensor random_tokens(const Shape& shape, int64_t vocab, uint32_t seed);

// Generalized tensor parallelism (gtp_cases.cpp): the GPT on a "tp-gtp-dp"
// grid of the world at these TP and GTP sizes against TP=1 without GTP.
// `llama`: the model with Llama's architecture (GQA, SwiGLU, rotary, untied head).
void check_gtp_gpt(comm::ProcessGroup& world, int tp, int gtp, parallel::SequenceParallel sp,
                   bool llama = false);
// Its model (vocabulary 257, width 24: unaligned) and a context with GTP on.
nn::GptConfig unaligned_config(int tp);
parallel::ContextPtr gtp_context(std::shared_ptr<comm::ProcessGroup> tp,
                                 std::shared_ptr<comm::ProcessGroup> gtp,
                                 parallel::SequenceParallel sp,
                                 parallel::gtp::Options options = {});

}  // namespace weft::nn::testing
