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

}  // namespace weft
