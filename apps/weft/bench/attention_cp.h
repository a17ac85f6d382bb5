// weft bench attention --cp N (attention_cp.cpp).
#pragma once

#include <cstdint>

#include "weft/core/dtype.h"
#include "weft/parallel/context/options.h"

namespace weft::bench {

struct AttentionCpOptions {
  int cp = 2;
  parallel::context::CpComm comm = parallel::context::CpComm::p2p;
  DType dtype = DType::f32;
  int64_t batch = 1, seq = 0, heads = 1, head_dim = 1;
  float dropout = 0.0f;
  int rounds = 5;
};

// Prints the table: the single rank at the total length against each cp rank.
void context_parallel_attention(const AttentionCpOptions& options);

}  // namespace weft::bench
