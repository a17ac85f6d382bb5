// Parallel contexts for tests: the options modules took one by one before
// they shared a parallel::ParallelContext.
#pragma once

#include <memory>

#include "weft/parallel/context.h"

namespace weft {

inline parallel::ContextPtr ctx_of(std::shared_ptr<comm::ProcessGroup> tp = nullptr,
                                   parallel::SequenceParallel sp = parallel::SequenceParallel::off,
                                   DType compute = DType::f32, uint64_t seed = 0) {
  return parallel::make_context(std::move(tp), sp, parallel::Precision::of(compute), seed);
}

// The same with a comm-GEMM overlap configuration.
inline parallel::ContextPtr ctx_of(std::shared_ptr<comm::ProcessGroup> tp,
                                   parallel::SequenceParallel sp, DType compute, uint64_t seed,
                                   parallel::OverlapConfig overlap) {
  auto c = std::make_shared<parallel::ParallelContext>(
      *parallel::make_context(std::move(tp), sp, parallel::Precision::of(compute), seed));
  c->workspace = std::make_shared<parallel::Workspace>();
  c->overlap = std::move(overlap);
  return c;
}

}  // namespace weft
