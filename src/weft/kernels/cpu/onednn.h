// Shared oneDNN plumbing for the CPU kernels: the engine, the calling thread's
// stream, and keeping oneDNN's OpenMP thread count equal to weft's budget for
// the calling thread. Include only from kernels/cpu/*.cpp and kernel .cpp
// files: dnnl.hpp is a heavy header.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "weft/core/dtype.h"

namespace weft::kernels::cpu {

dnnl::engine& engine();
dnnl::stream& stream();
// Applies weft::num_threads() to the calling thread's OpenMP team size and
// returns it.
int apply_thread_budget();
dnnl::memory::data_type to_dnnl(DType t);

}  // namespace weft::kernels::cpu
