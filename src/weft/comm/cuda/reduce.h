// The local backend's reduction on a GPU: the device twin of
// detail::reduce_buffers (comm/detail/reduce.h), for ranks that are threads
// sharing one GPU. A plain header, compiled only into CUDA builds
// (WEFT_HAVE_CUDA): the kernel is in reduce.cu.
#pragma once

#include <cstdint>
#include <span>

#include "weft/comm/process_group.h"
#include "weft/core/device.h"
#include "weft/core/dtype.h"

namespace weft::comm::gpu {

// The most inputs one reduction takes: one per rank of the group, passed to
// the kernel by value.
inline constexpr int kMaxInputs = 64;

// out[i] = op over inputs[k][i] for count elements of f32, bf16, f64 or i64 in
// device memory of `d`, with the arithmetic of detail::reduce_buffers, so the
// bits are the CPU backend's: inputs combined in the order given (f32 and bf16
// in f32, f64 and i64 in their own type; an i64 sum wraps around, avg
// truncates toward zero), avg divides the sum by `divisor` (a multiply by
// 1/divisor where that is exact), the result rounded once. `out` may be one of
// the inputs. Queued on the legacy default stream of `d` and not waited for:
// the caller synchronizes that stream before anyone reads `out`.
void reduce_buffers(Device d, DType dtype, ReduceOp op, void* out,
                    std::span<const void* const> inputs, int64_t count, int divisor);

}  // namespace weft::comm::gpu
