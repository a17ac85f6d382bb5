// Element-wise reductions over several buffers, and the local backend's copies:
// the arithmetic of the local and mpi backends (private to comm/).
#pragma once

#include <cstdint>
#include <span>

#include "weft/comm/process_group.h"
#include "weft/core/device.h"
#include "weft/core/dtype.h"

namespace weft::comm::detail {

// out[i] = op over inputs[k][i], for count elements of f32, bf16, f64 or i64.
// Inputs are combined in the order given (f32 and bf16 in f32, f64 and i64 in
// their own type; an i64 sum wraps around, avg truncates toward zero) and
// the result is rounded once, so every rank that reduces the same inputs gets
// the same bits (except which NaN a sum of two NaNs returns). avg divides the sum by `divisor`.
// `out` may be one of the inputs. Every buffer must be aligned to its element size.
void reduce_buffers(DType dtype, ReduceOp op, void* out, std::span<const void* const> inputs,
                    int64_t count, int divisor);

// From this size on, copy_buffer, copy_to_many and an out-of-place
// reduce_buffers stream their stores past the caches: below it the data fits
// in the caches, where normal stores are faster and leave the data where the
// next reader finds it.
inline constexpr int64_t kStreamingBytes = int64_t{4} << 20;

// memcpy for the local backend's data movement: large copies use streaming
// (non-temporal) stores, which skip reading the destination into the cache
// first; a copy bigger than the cache gains ~20-30% on the development VM.
void copy_buffer(void* dst, const void* src, int64_t bytes);

// copy_buffer of one source into several destinations. A large source is read
// from memory once, block by block, and each block is streamed to every
// destination while it is still in the L1 cache: n + 1 memory passes instead
// of 2n.
void copy_to_many(std::span<void* const> dsts, const void* src, int64_t bytes);

// A copy within the memory of `d`: host memory through copy_buffer, a GPU's
// through the CUDA runtime, on the legacy default stream (ordered after the
// work already queued on every weft stream and before what is queued later).
void copy_on(Device d, void* dst, const void* src, int64_t bytes);
// Waits for what copy_on (and reductions on the legacy stream) queued on `d`:
// a device-to-device cudaMemcpy may return before its copy is done, and a
// collective must not report completion, or hand its buffer to peers, before.
void settle(Device d);

}  // namespace weft::comm::detail
