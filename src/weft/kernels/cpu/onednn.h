// Shared oneDNN plumbing for the CPU kernels: the engine, the calling thread's
// stream, and keeping oneDNN's OpenMP thread count equal to the thread team of
// the execution context a kernel runs on. Include only from kernels/cpu/*.cpp and kernel .cpp
// files: dnnl.hpp is a heavy header.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "weft/core/dtype.h"
#include "weft/core/exec_context.h"

namespace weft::kernels::cpu {

dnnl::engine& engine();
dnnl::stream& stream();
// Applies ec.threads() to the calling thread's OpenMP team size (which oneDNN
// primitives run on) and returns it; inside an active OpenMP parallel region
// it changes nothing and returns 1 (oneDNN runs on the calling thread there).
int apply_thread_budget(const ExecContext& ec);
dnnl::memory::data_type to_dnnl(DType t);

// Whether bf16 work must be emulated (no native bf16 primitives on this ISA;
// see kernels/cpu_support.h).
bool emulate_bf16();

// The calling thread's f32 staging buffer number `slot` (0..3), at least `n`
// elements. It only grows, so a steady-state call allocates nothing; it is
// the emulated bf16 path's copy of its operands.
float* staging(int slot, int64_t n);

// bf16 <-> f32 over n contiguous elements, on the context's threads.
void widen_bf16(const ExecContext& ec, const uint16_t* src, float* dst, int64_t n);
void narrow_to_bf16(const ExecContext& ec, const float* src, uint16_t* dst, int64_t n);

}  // namespace weft::kernels::cpu
